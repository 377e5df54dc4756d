#!/usr/bin/env bash
# cluster_writer.sh: what cluster mode's fencing costs a writer, and how long its failovers take
# (issue 17; a benchmark, not a test). Same machine, same data, same client, one after the other:
#
#   single  `sextant serve --storage file://STORE`           (no etcd)
#   cluster `sextant cluster up --etcd 3 --writers 1`        (fenced writer, same store kind)
#
# For each: insert rate (ROWS rows of DIM floats in batches of BATCH through REST, one client),
# (cluster: also search QPS of one client against the writer directly and through the proxy),
# flush latency (seal + upload + commit: the cluster's commit is an etcd txn), median of FLUSHES.
# (Each flush seals 500 fresh rows; the index build that follows runs in the background.)
# Cluster only: kill -9 of the writer -> first acknowledged write (supervisor restart + WAL replay +
# the dead process's lease expiring, TTL s), kill -9 of the etcd leader -> first acknowledged
# write and first fenced commit, SIGSTOP of the writer -> its epoch key gone from etcd (TTL).
#
# Usage: bench/cluster_writer.sh [BUILD_DIR]     env: ROWS (20000) DIM (128) BATCH (500)
#        FLUSHES (5) TTL (5) PORT (29530)
# Needs: etcd (Debian etcd-server), python3 (the client).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build}"
bin="$root/$build/sextant"
[ -x "$bin" ] || bin="$build/sextant"
ROWS=${ROWS:-20000} DIM=${DIM:-128} BATCH=${BATCH:-500} FLUSHES=${FLUSHES:-5} TTL=${TTL:-5}
PORT=${PORT:-29530}
work=$(mktemp -d /tmp/sx-cluster-bench.XXXXXX)
cleanup() {
    "$bin" cluster down --dir "$work/cluster" >/dev/null 2>&1 || true
    [ -n "${spid:-}" ] && kill "$spid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
echo "cluster_writer.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$root" rev-parse --short HEAD), $(nproc) cores; rows $ROWS x $DIM, batch $BATCH, lease TTL $TTL s"

client() { # client URL MODE  -> prints "insert_rows_s flush_ms_median"
    python3 - "$1" "$ROWS" "$DIM" "$BATCH" "$FLUSHES" <<'EOF'
import json, random, statistics, sys, time, urllib.request
url, rows, dim, batch, flushes = sys.argv[1], *map(int, sys.argv[2:6])
def post(path, body):
    r = urllib.request.urlopen(urllib.request.Request(url + path, json.dumps(body).encode(),
                                                      {"Content-Type": "application/json"}), timeout=120)
    a = json.loads(r.read())
    if a.get("code", 0) != 0:
        raise SystemExit(f"{path}: {a}")
    return a
post("/v2/vectordb/collections/create", {"collectionName": "b", "dimension": dim, "metricType": "L2"})
rnd = random.Random(1)
vecs = [[rnd.random() for _ in range(dim)] for _ in range(batch)]
t0 = time.perf_counter()
for s in range(0, rows, batch):
    post("/v2/vectordb/entities/insert", {"collectionName": "b",
         "data": [{"id": s + i, "vector": vecs[i]} for i in range(batch)]})
ins = rows / (time.perf_counter() - t0)
fl = []
for f in range(flushes):
    post("/v2/vectordb/entities/insert", {"collectionName": "b",
         "data": [{"id": rows + f * batch + i, "vector": vecs[i]} for i in range(batch)]})
    t = time.perf_counter()
    post("/v2/vectordb/collections/flush", {"collectionName": "b"})
    fl.append((time.perf_counter() - t) * 1000)
print(f"{ins:.0f} {statistics.median(fl):.1f}")
EOF
}

first_ok() { # first_ok URL ID -> seconds until an insert is acknowledged
    python3 - "$1" "$2" "$DIM" <<'EOF'
import json, sys, time, urllib.request
url, i, dim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t0 = time.perf_counter()
while time.perf_counter() - t0 < 120:
    try:
        r = urllib.request.urlopen(urllib.request.Request(url + "/v2/vectordb/entities/insert",
            json.dumps({"collectionName": "b", "data": [{"id": i, "vector": [0.5] * dim}]}).encode(),
            {"Content-Type": "application/json"}), timeout=5)
        if json.loads(r.read()).get("code") == 0:
            break
    except Exception:
        pass
    time.sleep(0.05)
print(f"{time.perf_counter() - t0:.2f}")
EOF
}

first_flush() { # first_flush URL -> seconds until a flush (a fenced commit) succeeds
    python3 - "$1" <<'EOF'
import json, sys, time, urllib.request
url = sys.argv[1]
t0 = time.perf_counter()
while time.perf_counter() - t0 < 120:
    try:
        r = urllib.request.urlopen(urllib.request.Request(url + "/v2/vectordb/collections/flush",
            json.dumps({"collectionName": "b"}).encode(), {"Content-Type": "application/json"}),
            timeout=30)
        if json.loads(r.read()).get("code") == 0:
            break
    except Exception:
        pass
    time.sleep(0.05)
print(f"{time.perf_counter() - t0:.2f}")
EOF
}

# single node
mkdir -p "$work/store1"
"$bin" serve --data "$work/single" --port "$PORT" --storage "file://$work/store1" --quiet &
spid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.1; done
read -r s_ins s_fl < <(client "http://127.0.0.1:$PORT")
kill "$spid"; wait "$spid" || true; spid=""

# cluster
mkdir -p "$work/store2"
"$bin" cluster up --dir "$work/cluster" --port "$PORT" --etcd 3 --writers 1 --lease-ttl "$TTL" \
    --storage "file://$work/store2" >/dev/null
read -r c_ins c_fl < <(client "http://127.0.0.1:$((PORT + 1))")
# searches, one client for 5 s: the writer directly, then through the proxy (P; the writer is on P + 1)
read -r q_direct q_proxy < <(python3 - "$PORT" "$DIM" <<'EOF'
import json, sys, time, urllib.request
port, dim = int(sys.argv[1]), int(sys.argv[2])
def qps(p):
    body = json.dumps({"collectionName": "b", "data": [[0.5] * dim], "limit": 10}).encode()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 5:
        r = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{p}/v2/vectordb/entities/search",
                                   body, {"Content-Type": "application/json"}), timeout=30)
        assert json.loads(r.read())["code"] == 0
        n += 1
    return n / (time.perf_counter() - t0)
print(f"{qps(port + 1):.0f} {qps(port):.0f}")
EOF
)
eps=http://127.0.0.1:$((PORT + 101)),http://127.0.0.1:$((PORT + 102)),http://127.0.0.1:$((PORT + 103))
wpid=$(awk '$2 == "w1" {print $3}' "$work/cluster/cluster.state")
kill -9 "$wpid"
t_writer=$(first_ok "http://127.0.0.1:$((PORT + 1))" 900001)
leader=$(ETCDCTL_API=3 etcdctl --endpoints="$eps" endpoint status -w json 2>/dev/null |
    python3 -c 'import json,sys; s=json.load(sys.stdin); print(next(e["Endpoint"] for e in s if e["Status"]["leader"]==e["Status"]["header"]["member_id"]))')
lport=${leader##*:}
lpid=$(awk -v a="127.0.0.1:$lport" '$4 == a {print $3}' "$work/cluster/cluster.state")
kill -9 "$lpid"
t_leader=$(first_ok "http://127.0.0.1:$((PORT + 1))" 900002)
t_leader_flush=$(first_flush "http://127.0.0.1:$((PORT + 1))")
sleep 3
wpid=$(awk '$2 == "w1" {print $3}' "$work/cluster/cluster.state")
kill -STOP "$wpid"
t0=$(date +%s.%N)
epoch_held() {
    local keys
    keys=$(ETCDCTL_API=3 etcdctl --endpoints="$eps" get --prefix /sextant/ --keys-only 2>/dev/null || true)
    [[ "$keys" == *"/epoch/default/b"* ]]
}
while epoch_held; do sleep 0.05; done
t_stop=$(python3 -c "import time; print(f'{time.time() - $t0:.2f}')")
kill -CONT "$wpid"

printf '\n%-10s %14s %16s\n' "" "insert rows/s" "flush ms (p50)"
printf '%-10s %14s %16s\n' single "$s_ins" "$s_fl" cluster "$c_ins" "$c_fl"
python3 -c "print(f'ratio      {$c_ins/$s_ins:14.2f} {$c_fl/$s_fl:16.2f}   (cluster / single)')"
echo
echo "search, 1 client, 5 s: writer directly $q_direct QPS, through the proxy $q_proxy QPS"
echo
echo "writer kill -9 -> first acknowledged write: $t_writer s (restart, WAL replay, lease TTL $TTL s)"
echo "etcd leader kill -9 -> first acknowledged write: $t_leader s, first fenced commit (flush): $t_leader_flush s"
echo "writer SIGSTOP -> its epoch key gone from etcd: $t_stop s (TTL $TTL s)"
