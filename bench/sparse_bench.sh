#!/usr/bin/env bash
# bench/sparse_bench.sh BUILD_DIR [queries]: sparse-vector search on the WordNet glosses
# (bench/sparse_bench.c), one search thread pinned to one core with taskset (core 1 when the
# machine has two or more, else 0). Needs Debian's wordnet-base (installed here when missing).
set -euo pipefail
build=${1:-build}
nq=${2:-2000}
if [ ! -f /usr/share/wordnet/data.noun ]; then
    sudo_cmd=""
    [ "$(id -u)" != 0 ] && sudo_cmd="sudo"
    $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wordnet-base
fi
cmake --build "$build" --target sparse_bench >/dev/null
core=0
[ "$(nproc)" -ge 2 ] && core=1
dir=$(mktemp -d /tmp/sparse_bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
echo "sparse_bench: pinned with taskset -c $core (one search thread), $(date -u +%F)"
taskset -c "$core" "$build/sparse_bench" "$dir/db" "$nq"
