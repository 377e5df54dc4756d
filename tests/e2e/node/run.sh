#!/usr/bin/env bash
# tests/e2e/node/run.sh [SCRIPT]: ctest `node_sdk_e2e` (SCRIPT sdk_e2e.js, the default: the Milvus
# Node SDK's HttpClient over REST) and `node_grpc_e2e` (grpc_e2e.js: its gRPC MilvusClient on the
# same port, with a users file: root:Milvus read-write, reader:secret read-only). Starts
# "$SX_SEXTANT_BIN" serve on a fresh data directory and a free loopback port, waits for GET /livez,
# runs SCRIPT against it, then stops the server with SIGTERM and requires exit status 0 (a
# graceful stop). Exit 77 (skipped) when node (>= 18, for fetch) or the SDK
# (node_modules/@zilliz, installed by `npm ci` in this directory; .ci/run does it) is missing.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"

need_node 18 "no fetch"
need_module @zilliz/milvus2-sdk-node @zilliz
need_sextant
script="${1:-sdk_e2e.js}"
make_tmp "node_${script%.js}"
extra=()
if [ "$script" = grpc_e2e.js ]; then
    printf 'root:Milvus\nreader:secret:ro\n' >"$tmp/users"
    extra=(--users "$tmp/users" --max-body-mb 4)
fi
pid=""
cleanup() {
    kill_sextant
    rm -rf "$tmp"
}
trap cleanup EXIT

start_sextant "${extra[@]}" || exit 1

cd "$here"
MILVUS_URL="http://127.0.0.1:$port" MILVUS_ADDR="127.0.0.1:$port" MILVUS_USER=root \
    MILVUS_PASS=Milvus MILVUS_RO_USER=reader MILVUS_RO_PASS=secret node "$script"
rc=$?

# Graceful stop: SIGTERM, up to 60 s, exit status 0.
if ! stop_sextant; then
    [ "$rc" = 0 ] && rc=1
elif [ "$rc" != 0 ]; then
    echo "server log:" >&2
    cat "$tmp/server.log" >&2
fi
exit "$rc"
