#!/usr/bin/env bash
# cluster_shards.sh: a sharded collection through the cluster proxy against a single server on
# the same data (issue 17; a benchmark, not a test). Fashion-MNIST (60k x 784, Debian's
# dataset-fashion-mnist), HNSW M=16 efConstruction=200, L2, loaded by the same REST client
# (python3, batches of 1000 rows) into
#
#   single   one `sextant serve --storage file://STORE` (no etcd), the collection unsharded
#   cluster  `sextant cluster up --etcd 3 --writers 2 --query-nodes 1` on file://STORE2, the
#            collection created through the proxy with shardsNum SHARDS (default 2: one per
#            writer), its rows split by key hash
#
# and reports:
#   load     seconds from create to query-ready: rows inserted, flushed, the index built on
#            every shard (indexes/describe: indexedRows == totalRows), and (cluster) a query
#            node serving every row
#   join     seconds until a query node started later (`serve --query --etcd`, empty
#            directory) serves every row
#   search   `sextant bench --target` (REST, nq=1, top-10, ef=64, DUR s, concurrency C): the
#            single server directly; the proxy with consistencyLevel Eventually at 1, 2 and 3
#            query nodes (each shard of a search goes to the next query node, so one search
#            runs on min(SHARDS, nodes) nodes); recall@10 against Fashion-MNIST's ground truth
#   split    per query node: its share of the shard searches and their mean time on the node
#            (its /metrics), so the proxy's cost (forward, fan-out, merge) is the client's mean
#            latency less the nodes' mean
#
# Every process runs on this host: with 2 cores, more query nodes share the same CPUs, so the
# figures show the split and the overhead, not a scale-out.
# Usage: bench/cluster_shards.sh [BUILD_DIR] [DUR] [C]   (defaults build 10 "1,4")
#        env: SHARDS (2) PORT (29630) ROWS (all 60000)
# Needs: etcd (Debian etcd-server), python3, dataset-fashion-mnist.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build}"
dur="${2:-10}"
conc="${3:-1,4}"
bin="$(cd "$build" && pwd)/sextant"
SHARDS=${SHARDS:-2} P=${PORT:-29630} ROWS=${ROWS:-60000}
data=/usr/share/datasets/fashion-mnist
gt="$root/../shared/data/fashion-mnist/fmnist_groundtruth_l2_k100.ivecs"
[ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "needs $data (make deps)" >&2; exit 1; }
[ -x /usr/bin/etcd ] || { echo "needs /usr/bin/etcd (make deps: etcd-server)" >&2; exit 1; }
work=$(mktemp -d /tmp/sx-cluster-shards.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    "$bin" cluster down --dir "$work/cluster" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { python3 -c "print(f'{$(now) - $1:.2f}')"; }
echo "cluster_shards.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$root" rev-parse --short HEAD), $(nproc) cores; shards $SHARDS, rows $ROWS"

# load URL SHARDS LEVEL -> prints "insert_s flush_s indexed_s" (seconds since create)
load() {
    python3 - "$1" "$2" "$data/train-images-idx3-ubyte.gz" "$ROWS" <<'PY'
import gzip, json, struct, sys, time, urllib.request
url, shards, path, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def post(p, body):
    r = urllib.request.urlopen(urllib.request.Request(url + p, json.dumps(body).encode(),
                               {"Content-Type": "application/json"}), timeout=600)
    a = json.loads(r.read())
    if a.get("code", 0) != 0:
        raise SystemExit(f"{p}: {a}")
    return a
f = gzip.open(path, "rb")
_, n, rows, cols = struct.unpack(">IIII", f.read(16))
n, dim = min(n, limit), rows * cols
t0 = time.perf_counter()
body = {"collectionName": "fm",
        "schema": {"fields": [{"fieldName": "id", "dataType": "Int64", "isPrimary": True},
                              {"fieldName": "vector", "dataType": "FloatVector",
                               "elementTypeParams": {"dim": dim}}]},
        "indexParams": [{"fieldName": "vector", "metricType": "L2", "indexType": "HNSW",
                         "params": {"M": 16, "efConstruction": 200}}]}
if shards > 1:
    body["params"] = {"shardsNum": shards}
post("/v2/vectordb/collections/create", body)
for s in range(0, n, 1000):
    m = min(1000, n - s)
    raw = f.read(m * dim)
    post("/v2/vectordb/entities/insert", {"collectionName": "fm", "data": [
        {"id": s + i, "vector": list(raw[i * dim:(i + 1) * dim])} for i in range(m)]})
t_ins = time.perf_counter() - t0
post("/v2/vectordb/collections/flush", {"collectionName": "fm"})
t_fl = time.perf_counter() - t0
while True:
    d = post("/v2/vectordb/indexes/describe", {"collectionName": "fm", "indexName": "vector"})["data"][0]
    if d.get("indexState") == "Finished" and d.get("indexedRows") == d.get("totalRows") == n:
        break
    time.sleep(0.05)
print(f"{t_ins:.2f} {t_fl:.2f} {time.perf_counter() - t0:.2f}")
PY
}
rows() { # rows PORT [LEVEL [COLLECTION]] -> count(*) or -1
    curl -s -m 5 "http://127.0.0.1:$1/v2/vectordb/entities/query" \
        -d "{\"collectionName\":\"${3:-fm}\",\"filter\":\"id >= 0\",\"outputFields\":[\"count(*)\"]${2:+,\"consistencyLevel\":\"$2\"}}" |
        python3 -c 'import json,sys
try: print(json.load(sys.stdin)["data"][0]["count(*)"])
except Exception: print(-1)'
}
shard_rows() { # shard_rows PORT -> the rows of every shard of fm on a query node, -1 if one is missing
    local sum=0 r k
    for ((k = 0; k < SHARDS; k++)); do
        r=$(rows "$1" Eventually "fm__s$k")
        [ "$r" = -1 ] && { echo -1; return; }
        sum=$((sum + r))
    done
    echo "$sum"
}
bench() { # bench URL LABEL [LEVEL]
    "$bin" bench --target "$1" --collection fm --query "$data/t10k-images-idx3-ubyte.gz" --gt "$gt" \
        --concurrency "$conc" --duration "$dur" --warmup 2 --interval "$dur" --limit 10 \
        --search-params '{"ef":64}' ${3:+--consistency "$3"} --json "$work/$2.json" >/dev/null 2>&1
}
# per query node: "searches seconds" of entities/search from its /metrics
node_stats() {
    curl -s "http://127.0.0.1:$1/metrics" | python3 -c 'import sys
n = t = 0
for l in sys.stdin:
    if "route=\"/v2/vectordb/entities/search\"" not in l: continue
    if l.startswith("sextant_http_requests_total"): n += float(l.split()[-1])
    elif l.startswith("sextant_http_request_duration_seconds_sum"): t += float(l.split()[-1])
print(int(n), t)'
}

# single server
"$bin" serve --data "$work/single" --port "$P" --quiet --storage "file://$work/store1" &
spid=$!
pids+=($spid)
until curl -s -o /dev/null "http://127.0.0.1:$P/readyz"; do sleep 0.05; done
read -r s_ins s_fl s_idx < <(load "http://127.0.0.1:$P" 1)
bench "http://127.0.0.1:$P" single
kill "$spid"; wait "$spid" 2>/dev/null || true; pids=()

# cluster: 2 writers, 1 query node, the proxy at P+99
"$bin" cluster up --dir "$work/cluster" --port "$P" --etcd 3 --writers 2 --query-nodes 1 \
    --storage "file://$work/store2" >/dev/null
proxy="http://127.0.0.1:$((P + 99))"
eps="http://127.0.0.1:$((P + 101)),http://127.0.0.1:$((P + 102)),http://127.0.0.1:$((P + 103))"
t0=$(now)
read -r c_ins c_fl c_idx < <(load "$proxy" "$SHARDS")
N=$(rows "$((P + 99))")
while [ "$(rows "$((P + 99))" Eventually)" != "$N" ]; do sleep 0.05; done
c_ready=$(since "$t0")
declare -A before
level_stats() { # level_stats LABEL PORTS...: the nodes' searches and seconds since `mark`
    local label=$1; shift
    for port in "$@"; do
        read -r n t < <(node_stats "$port")
        read -r n0 t0s <<<"${before[$port]}"
        echo "$label $port $((n - n0)) $(python3 -c "print($t - $t0s)")"
    done >>"$work/split.txt"
}
mark() { for port in "$@"; do before[$port]="$(node_stats "$port")"; done; }
qports=("$((P + 50))")
mark "${qports[@]}"
bench "$proxy" q1 Eventually
level_stats q1 "${qports[@]}"
joins=()
for k in 2 3; do
    qp=$((P + 49 + k))
    t0=$(now)
    "$bin" serve --query --data "$work/q$k" --port "$qp" --quiet --storage "file://$work/store2" \
        --etcd "$eps" --node-id "q$k" &
    pids+=($!)
    while [ "$(shard_rows "$qp")" != "$N" ]; do sleep 0.05; done
    joins+=("$(since "$t0")")
    sleep 1 # the proxy reads the node list at most every 500 ms
    qports+=("$qp")
    mark "${qports[@]}"
    bench "$proxy" "q$k" Eventually
    level_stats "q$k" "${qports[@]}"
done

python3 - "$work" "$N" "$SHARDS" "$s_ins $s_fl $s_idx" "$c_ins $c_fl $c_idx $c_ready" "${joins[*]}" <<'PY'
import json, sys
w, n, shards = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = [float(x) for x in sys.argv[4].split()]
c = [float(x) for x in sys.argv[5].split()]
joins = sys.argv[6].split()
load = lambda lab: json.load(open(f"{w}/{lab}.json"))["levels"]
print(f"\nload of {n} rows (create -> inserted / flushed / index built on every shard):")
print(f"  single server        {s[0]:.1f} / {s[1]:.1f} / {s[2]:.1f} s")
print(f"  cluster, {shards} shards    {c[0]:.1f} / {c[1]:.1f} / {c[2]:.1f} s; a query node serving every row at {c[3]:.1f} s")
print(f"join: a new query node serves every row {', '.join(j + ' s' for j in joins)} after its start (2nd, 3rd)\n")
split = {}
for line in open(f"{w}/split.txt"):
    lab, port, cnt, secs = line.split()
    split.setdefault(lab, []).append((port, int(cnt), float(secs)))
print("| target | concurrency | QPS | p99 ms | mean ms | recall@10 | failures | shard searches per node (share, mean ms on the node) |")
print("|---|---|---|---|---|---|---|---|")
for lv in load("single"):
    print(f'| single server | {lv["concurrency"]} | {lv["qps"]:.0f} | {lv["latency_ms"]["p99"]:.2f} | '
          f'{lv["latency_ms"]["avg"]:.2f} | {lv.get("recall", 0):.4f} | {lv["failures"]} | - |')
for lab in ("q1", "q2", "q3"):
    nodes = split.get(lab, [])
    tot = sum(x[1] for x in nodes) or 1
    desc = ", ".join(f"{100 * cnt / tot:.0f}% {1000 * secs / max(cnt, 1):.2f}" for _, cnt, secs in nodes)
    for lv in load(lab):
        print(f'| proxy, {lab[1]} query node(s) | {lv["concurrency"]} | {lv["qps"]:.0f} | {lv["latency_ms"]["p99"]:.2f} | '
              f'{lv["latency_ms"]["avg"]:.2f} | {lv.get("recall", 0):.4f} | {lv["failures"]} | {desc} (all levels) |')
PY
