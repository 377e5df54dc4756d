#!/usr/bin/env bash
# cluster_query.sh: query nodes against a single server on the same data (issue 17; a benchmark,
# not a test). Fashion-MNIST (60k x 784, Debian's dataset-fashion-mnist) is imported once with an
# HNSW index (M=16, efConstruction=200) into a data directory whose store is file://STORE; then:
#
#   open    seconds until it answers with every row: `sextant serve` restarted on its own
#           directory (local files) vs a new query node (`sextant serve --query` on an empty
#           directory: downloads the segments and the index from the store, loads them)
#   search  `sextant bench --target` (REST, nq=1, top-10, ef=64, DUR s per level) against the
#           single server, one query node, and two query nodes each with its own client at the
#           same time (their QPS summed): concurrency C per client
#   follow  after one more flush on the writer, seconds until a query node serves the new rows
#           (--refresh-ms 500)
#
# Every process runs on this host: with 2 cores, two query nodes share the CPUs the single
# server had alone, so the two-node figure shows the split and the overhead, not a scale-out.
# Usage: bench/cluster_query.sh [BUILD_DIR] [DUR] [C]   (defaults build 10 "1,4")
set -euo pipefail
build="${1:-build}"
dur="${2:-10}"
conc="${3:-1,4}"
bin="$(cd "$build" && pwd)/sextant"
root="$(cd "$(dirname "$0")/.." && pwd)"
data=/usr/share/datasets/fashion-mnist
gt="$root/../shared/data/fashion-mnist/fmnist_groundtruth_l2_k100.ivecs"
work="${SX_BENCH_DIR:-/tmp/sx_cluster_query}"
P=${SX_BENCH_PORT:-19831}
[ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "needs $data (make deps)" >&2; exit 1; }
mkdir -p "$work"
store="$work/store"
if [ ! -f "$store/fmnist/MANIFEST" ]; then
    rm -rf "$work/db" "$store"
    mkdir -p "$store"
    "$bin" import --data "$work/db" --storage "file://$store" --collection fmnist \
        --file "$data/train-images-idx3-ubyte.gz" --index hnsw --param M=16 \
        --param efConstruction=200 >&2
fi
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
now() { date +%s.%N; }
rows() { # rows PORT -> count(*) or -1
    curl -s -m 5 "http://127.0.0.1:$1/v2/vectordb/entities/query" \
        -d '{"collectionName":"fmnist","filter":"id >= 0","outputFields":["count(*)"]}' |
        python3 -c 'import json,sys
try: print(json.load(sys.stdin)["data"][0]["count(*)"])
except Exception: print(-1)'
}
wait_rows() { # wait_rows PORT N -> seconds since $t0
    while [ "$(rows "$1")" != "$2" ]; do sleep 0.02; done
    python3 -c "print(f'{$(now) - $t0:.2f}')"
}
bench() { # bench PORT LABEL
    "$bin" bench --target "http://127.0.0.1:$1" --collection fmnist \
        --query "$data/t10k-images-idx3-ubyte.gz" --gt "$gt" --concurrency "$conc" \
        --duration "$dur" --warmup 2 --interval "$dur" --limit 10 --search-params '{"ef":64}' \
        --json "$work/$2.json" >/dev/null 2>&1
}
echo "cluster_query.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$root" rev-parse --short HEAD), $(nproc) cores"

# single server: open on its own directory (N: the rows it has; 60,000 unless a run was cut)
t0=$(now)
"$bin" serve --data "$work/db" --port "$P" --quiet --storage "file://$store" &
pids+=($!)
while [ "$(rows "$P")" = "-1" ]; do sleep 0.02; done
t_single=$(python3 -c "print(f'{$(now) - $t0:.2f}')")
N=$(rows "$P")
bench "$P" single
kill "${pids[0]}"; wait "${pids[0]}" || true; pids=()

# query nodes on empty directories
rm -rf "$work/q1" "$work/q2"
t0=$(now)
"$bin" serve --query --data "$work/q1" --port "$((P + 1))" --quiet --storage "file://$store" &
pids+=($!)
t_join=$(wait_rows "$((P + 1))" "$N")
"$bin" serve --query --data "$work/q2" --port "$((P + 2))" --quiet --storage "file://$store" &
pids+=($!)
wait_rows "$((P + 2))" "$N" >/dev/null
bench "$((P + 1))" q1
bench "$((P + 1))" q1of2 &
b1=$!
bench "$((P + 2))" q2of2
wait "$b1"

# follow: the writer (single server on the import directory) adds a batch and flushes
"$bin" serve --data "$work/db" --port "$P" --quiet --storage "file://$store" &
pids+=($!)
wait_rows "$P" "$N" >/dev/null
python3 - "$P" <<'PY'
import json, sys, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}"
rows = [{"id": 1_000_000 + i, "vector": [0.0] * 784} for i in range(100)]
for path, body in (("/v2/vectordb/entities/insert", {"collectionName": "fmnist", "data": rows}),
                   ("/v2/vectordb/collections/flush", {"collectionName": "fmnist"})):
    r = urllib.request.urlopen(urllib.request.Request(url + path, json.dumps(body).encode(),
                               {"Content-Type": "application/json"}), timeout=120)
    assert json.loads(r.read())["code"] == 0
PY
t0=$(now)
t_follow=$(wait_rows "$((P + 1))" "$((N + 100))")
# leave the data as it was: the 100 rows go again
python3 - "$P" <<'PY'
import json, sys, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}"
for path, body in (("/v2/vectordb/entities/delete", {"collectionName": "fmnist", "filter": "id >= 1000000"}),
                   ("/v2/vectordb/collections/flush", {"collectionName": "fmnist"})):
    r = urllib.request.urlopen(urllib.request.Request(url + path, json.dumps(body).encode(),
                               {"Content-Type": "application/json"}), timeout=120)
    assert json.loads(r.read())["code"] == 0
PY

python3 - "$work" "$t_single" "$t_join" "$t_follow" <<'PY'
import json, sys
w, ts, tj, tf = sys.argv[1], *sys.argv[2:5]
load = lambda n: json.load(open(f"{w}/{n}.json"))["levels"]
s, q1, a, b = load("single"), load("q1"), load("q1of2"), load("q2of2")
print(f"\nopen: single server on its directory {ts} s; new query node from the store {tj} s")
print(f"follow: a flush on the writer served by a query node after {tf} s (refresh 500 ms)\n")
print("| clients x concurrency | single QPS | 1 query node QPS | 2 query nodes QPS (q1 + q2) | p99 ms single / q1 / q1,q2 | recall@10 |")
print("|---|---|---|---|---|---|")
for ls, l1, la, lb in zip(s, q1, a, b):
    print(f'| {ls["concurrency"]} | {ls["qps"]:.0f} | {l1["qps"]:.0f} | {la["qps"] + lb["qps"]:.0f} ({la["qps"]:.0f} + {lb["qps"]:.0f}) | '
          f'{ls["latency_ms"]["p99"]:.2f} / {l1["latency_ms"]["p99"]:.2f} / {la["latency_ms"]["p99"]:.2f}, {lb["latency_ms"]["p99"]:.2f} | '
          f'{ls.get("recall", 0):.4f} / {l1.get("recall", 0):.4f} |')
PY
