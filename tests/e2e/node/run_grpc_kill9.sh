#!/usr/bin/env bash
# tests/e2e/node/run_grpc_kill9.sh: ctest `node_grpc_kill9` (issue 15, reliability.md T1 over gRPC).
# Rounds (SX_KILL_ROUNDS_GRPC, default 5) of: start "$SX_SEXTANT_BIN" serve, the Node SDK's gRPC
# client inserts and deletes batches (grpc_kill9.js load) while this script sends SIGKILL to the
# server after a random 0.3-1.5 s; restart; grpc_kill9.js verify checks every acknowledged
# operation survived and no batch is torn. Exit 77 when node or the SDK is missing.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"
need_node 18 "the SDK"
need_module @zilliz/milvus2-sdk-node @zilliz
need_sextant
make_tmp node_grpc_kill9
pid=""
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
rounds="${SX_KILL_ROUNDS_GRPC:-5}"
port="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close();});')"
export MILVUS_ADDR="127.0.0.1:$port"
start() {
    "$bin" serve --data "$tmp/data" --port "$port" --quiet >>"$tmp/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do
        curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "server did not come up; log:" >&2
    cat "$tmp/server.log" >&2
    exit 1
}
cd "$here"
start
node grpc_kill9.js setup 0 "$tmp/ack.0" || exit 1
for r in $(seq 1 "$rounds"); do
    node grpc_kill9.js load "$r" "$tmp/ack.$r" &
    cpid=$!
    sleep "$(node -e 'console.log((0.3 + Math.random() * 1.2).toFixed(2))')"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    pid=""
    wait "$cpid" || { echo "load client failed in round $r" >&2; exit 1; }
    start
    node grpc_kill9.js verify "$r" "$tmp/ack.$r" || { cat "$tmp/server.log" >&2; exit 1; }
done
# every earlier round still verifies after the last restart
for r in $(seq 1 "$rounds"); do
    node grpc_kill9.js verify "$r" "$tmp/ack.$r" >/dev/null || exit 1
done
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
[ "$rc" = 0 ] || { echo "server exited $rc after SIGTERM" >&2; exit 1; }
echo "node_grpc_kill9: $rounds rounds of kill -9 during gRPC inserts and deletes: nothing acknowledged lost"
