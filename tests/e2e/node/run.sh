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
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
    node -e 'const s = require("net").createServer();
             s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

# GET url until it answers 200 or the server process exits; 30 s at most.
wait_live() {
    node -e '
      const [url, pid] = [process.argv[1], Number(process.argv[2])];
      const deadline = Date.now() + 30000;
      (async () => {
        for (;;) {
          try { process.kill(pid, 0); } catch { process.exit(2); }
          try { const r = await fetch(url); if (r.status === 200) process.exit(0); } catch {}
          if (Date.now() > deadline) process.exit(1);
          await new Promise((r) => setTimeout(r, 100));
        }
      })();' "$1" "$2"
}

# A port found free can be taken before the server binds it: try a few.
started=0
for attempt in 1 2 3; do
    port="$(free_port)"
    rm -rf "$tmp/data"
    "$bin" serve --data "$tmp/data" --port "$port" --quiet "${extra[@]}" >"$tmp/server.log" 2>&1 &
    pid=$!
    if wait_live "http://127.0.0.1:$port/livez" "$pid"; then
        started=1
        break
    fi
    echo "server did not come up on port $port (attempt $attempt):" >&2
    cat "$tmp/server.log" >&2
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    pid=""
done
if [ "$started" != 1 ]; then
    exit 1
fi

cd "$here"
MILVUS_URL="http://127.0.0.1:$port" MILVUS_ADDR="127.0.0.1:$port" MILVUS_USER=root \
    MILVUS_PASS=Milvus MILVUS_RO_USER=reader MILVUS_RO_PASS=secret node "$script"
rc=$?

# Graceful stop: SIGTERM, up to 60 s, exit status 0.
kill -TERM "$pid"
for _ in $(seq 1 600); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
    echo "server did not exit within 60 s of SIGTERM" >&2
    exit 1
fi
wait "$pid"
src=$?
pid=""
if [ "$src" != 0 ]; then
    echo "server exited with status $src after SIGTERM; its log:" >&2
    cat "$tmp/server.log" >&2
    [ "$rc" = 0 ] && rc=1
fi
if [ "$rc" != 0 ] && [ "$src" = 0 ]; then
    echo "server log:" >&2
    cat "$tmp/server.log" >&2
fi
exit "$rc"
