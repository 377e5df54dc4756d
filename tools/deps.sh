#!/usr/bin/env bash
# Installs the Debian packages the build, tests and demo need, only when missing.
# Runs `apt-get update` once, and only if something has to be installed.
set -euo pipefail
need=(cmake gcc g++ make pkg-config libopenblas-dev zlib1g-dev libhnswlib-dev libfaiss-dev liburing-dev
      libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev prometheus curl)
[ "${SX_DEPS_DEMO:-0}" = 1 ] && need+=(dataset-fashion-mnist)
missing=()
for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
