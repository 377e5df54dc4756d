#!/usr/bin/env bash
# Installs the Debian packages the build, tests and demo need, only when missing.
# Runs `apt-get update` once, and only if something has to be installed.
set -euo pipefail
need=(cmake gcc g++ make binutils pkg-config libopenblas-dev zlib1g-dev libhnswlib-dev libfaiss-dev liburing-dev
      libmicrohttpd-dev libjansson-dev libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev libcurl4-openssl-dev libssl-dev libexpat1-dev libargon2-dev prometheus curl
      clang libclang-rt-14-dev clang-format clang-tidy libhdf5-dev chromium firefox-esr dataset-fashion-mnist etcd-server)
# clang-format, clang-tidy: the lint stage (ctest lint_format, make lint; issue 12).
# chromium: the real-browser checks of the HTML report and the web console (ctest
# report_browser_e2e, webui_browser_e2e, headless); firefox-esr: the console in the second engine
# (webui_firefox_e2e, over WebDriver BiDi).
# etcd-server: cluster mode's metadata store (issue 17); the tests start their own members on
# free ports (tests/harness/etcd.h), so the packaged service is stopped and disabled.
# dataset-fashion-mnist: make demo's data, and the Fashion-MNIST recall gates of test_hnsw,
# test_hnsw_sq and test_cagra (without it they end as skipped, not passed).
# Node.js runs the Milvus Node SDK end-to-end test (tests/e2e/node); Debian's when there is none.
command -v node >/dev/null 2>&1 || need+=(nodejs npm)
missing=()
for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
    if [[ " ${missing[*]} " == *" etcd-server "* ]] && command -v systemctl >/dev/null 2>&1; then
        $SUDO systemctl disable --now etcd >/dev/null 2>&1 || true
    fi
fi
# The pinned Node packages (tests/e2e/node/package-lock.json: the Node SDK, s3rver,
# playwright-core), once. Without network the Node tests are skipped (exit 77), never failed.
node_dir="$(dirname "$0")/../tests/e2e/node"
if command -v npm >/dev/null 2>&1 &&
    { [ ! -d "$node_dir/node_modules/@zilliz/milvus2-sdk-node" ] ||
      [ ! -f "$node_dir/node_modules/playwright-core/package.json" ] ||
      [ ! -f "$node_dir/node_modules/ws/package.json" ]; }; then
    echo "deps: npm ci in tests/e2e/node"
    (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error) ||
        echo "deps: npm ci failed (offline?): the Node SDK test will be skipped" >&2
fi
exit 0
