#!/usr/bin/env bash
# tests/e2e/node/run_cluster_grpc.sh: ctest `node_cluster_grpc` (issue 17: gRPC through the
# cluster proxy). Starts `sextant cluster up` (3 etcd members, 2 writers, 1 query node, the
# proxy, s3rver) and runs cluster_grpc.js, the Node SDK's gRPC MilvusClient against the proxy's
# port, which serves REST and gRPC as a node does. Then `cluster down`, which must leave nothing
# running. Exit 77 when node, the SDK or /usr/bin/etcd is missing.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"
need_node 18 "the SDK"
need_module @zilliz/milvus2-sdk-node @zilliz
need_sextant
etcd_bin="${SX_ETCD_BIN:-/usr/bin/etcd}"
if [ ! -x "$etcd_bin" ]; then
    echo "$etcd_bin is not installed (Debian etcd-server): skipped"
    exit 77
fi
make_tmp node_cluster_grpc
dir="$tmp/cluster"
cleanup() {
    "$bin" cluster down --dir "$dir" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
# a port base with the cluster's ports free (the proxy P, writers P+1.., query node P+50, etcd
# P+101.. and P+201.., s3rver P+300)
base=""
for _ in $(seq 1 50); do
    b=$((10000 + RANDOM % 20000))
    if node -e '
        const net = require("net");
        const b = Number(process.argv[1]);
        const ports = [b, b + 1, b + 2, b + 50, b + 101, b + 102, b + 103, b + 201, b + 202, b + 203, b + 300];
        (async () => {
          for (const p of ports) {
            const ok = await new Promise((res) => {
              const s = net.createServer();
              s.once("error", () => res(false));
              s.listen(p, "127.0.0.1", () => s.close(() => res(true)));
            });
            if (!ok) process.exit(1);
          }
        })();' "$b"; then
        base="$b"
        break
    fi
done
[ -n "$base" ] || { echo "no free port base" >&2; exit 1; }
if ! "$bin" cluster up --dir "$dir" --port "$base" --etcd 3 --writers 2 --query-nodes 1 \
    --lease-ttl 2 >"$tmp/up.log" 2>&1; then
    echo "cluster up failed:" >&2
    cat "$tmp/up.log" >&2
    exit 1
fi
proxy="127.0.0.1:$base"
# REST on the same port as gRPC
curl -sf "http://$proxy/readyz" >/dev/null || { echo "the proxy's /readyz did not answer" >&2; exit 1; }
export MILVUS_ADDR="$proxy"
cd "$here"
node cluster_grpc.js
rc=$?
if [ "$rc" != 0 ]; then
    "$bin" cluster status --dir "$dir" >&2
    tail -n 30 "$dir"/*.log >&2 2>/dev/null
    exit 1
fi
"$bin" cluster down --dir "$dir" >"$tmp/down.log" 2>&1 || { cat "$tmp/down.log" >&2; exit 1; }
# the nodes are child processes: a sanitizer report in their logs fails the test
san='ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer|runtime error:'
if grep -q -E "$san" "$dir"/logs/*.log 2>/dev/null; then
    echo "sanitizer report in the cluster's logs:" >&2
    grep -H -A25 -E "$san" "$dir"/logs/*.log >&2
    exit 1
fi
exit 0
