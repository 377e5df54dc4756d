#!/usr/bin/env bash
# cluster_index.sh: index build throughput with 0, 1 and 2 index workers (issue 17; a benchmark,
# not a test). For each K: `sextant cluster up --etcd 1 --writers 1 --index-workers K
# --build-threads 1 --segment-mb SEG` on a file:// store; Fashion-MNIST (60k x 784, Debian's
# dataset-fashion-mnist) loaded through the proxy with no index (REST, batches of 1000 rows,
# python3), flushed (segments sealed at SEG MiB of vectors, default 24: 8 segments); then an HNSW
# index (M=16, efConstruction=200, L2) is created and the time until it is Finished with every
# row indexed is measured. K=0: the writer builds every segment itself, one after another (its
# one builder thread). Every build uses one thread, so the figure is builds in parallel, not
# threads per build.
#
# Reported per K: seconds from create to Finished, segments per minute, and (K > 0) the workers'
# segments each worker built, the mean build time, and the mean time a worker spent moving data
# (the segment's download, the index file's upload; from the workers' logs).
# Every process runs on this host: with 2 cores, 2 workers is the most that can run in parallel.
# Usage: bench/cluster_index.sh [BUILD_DIR]   env: PORT (29730) SEG (24) ROWS (60000) KS ("0 1 2")
# Needs: etcd (Debian etcd-server), python3, dataset-fashion-mnist.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build}"
bin="$(cd "$build" && pwd)/sextant"
P=${PORT:-29730} SEG=${SEG:-24} ROWS=${ROWS:-60000} KS=${KS:-"0 1 2"}
data=/usr/share/datasets/fashion-mnist
[ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "needs $data (make deps)" >&2; exit 1; }
[ -x /usr/bin/etcd ] || { echo "needs /usr/bin/etcd (make deps: etcd-server)" >&2; exit 1; }
work=$(mktemp -d /tmp/sx-cluster-index.XXXXXX)
cleanup() {
    "$bin" cluster down --dir "$work/cluster" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
echo "cluster_index.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$root" rev-parse --short HEAD), $(nproc) cores; $ROWS rows, segments of $SEG MiB, 1 build thread per build"

# run URL -> "segments seconds" (create index -> Finished)
run() {
    python3 - "$1" "$data/train-images-idx3-ubyte.gz" "$ROWS" <<'PY'
import gzip, json, struct, sys, time, urllib.request
url, path, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
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
post("/v2/vectordb/collections/create", {"collectionName": "fm",
     "schema": {"fields": [{"fieldName": "id", "dataType": "Int64", "isPrimary": True},
                           {"fieldName": "vector", "dataType": "FloatVector",
                            "elementTypeParams": {"dim": dim}}]}})
for s in range(0, n, 1000):
    m = min(1000, n - s)
    raw = f.read(m * dim)
    post("/v2/vectordb/entities/insert", {"collectionName": "fm", "data":
         [{"id": s + i, "vector": list(raw[i * dim:(i + 1) * dim])} for i in range(m)]})
post("/v2/vectordb/collections/flush", {"collectionName": "fm"})
t0 = time.perf_counter()
post("/v2/vectordb/indexes/create", {"collectionName": "fm", "indexParams": [
     {"fieldName": "vector", "indexName": "vector", "metricType": "L2",
      "params": {"index_type": "HNSW", "M": 16, "efConstruction": 200}}]})
while True:
    d = post("/v2/vectordb/indexes/describe", {"collectionName": "fm", "indexName": "vector"})["data"][0]
    if d.get("indexState") == "Finished" and d.get("indexedRows") == d.get("totalRows") == n:
        break
    time.sleep(0.05)
print(time.perf_counter() - t0)
PY
}

for K in $KS; do
    "$bin" cluster up --dir "$work/cluster" --port "$P" --etcd 1 --writers 1 --index-workers "$K" \
        --build-threads 1 --segment-mb "$SEG" --storage "file://$work/store$K" >/dev/null
    t=$(run "http://127.0.0.1:$P")
    logs="$work/cluster/logs"
    segs=$(ls "$work/cluster/w1/collections/fm/" | grep -c '\.sxs$' || true)
    python3 - "$K" "$t" "$segs" "$logs" <<'PY'
import glob, re, sys
k, t, segs, logs = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
line = f"K={k}: {segs} segments indexed in {t:.2f} s ({60 * segs / t:.1f} segments/min)"
if k:
    per, builds, moves = {}, [], []
    for lg in sorted(glob.glob(f"{logs}/x*.log")):
        w = lg.split("/")[-1][:-4]
        for l in open(lg):
            m = re.search(r"of fm segment \d+ .* built in ([0-9.]+) s "
                          r"\(download ([0-9.]+) s, upload ([0-9.]+) s\)", l)
            if m:
                per[w] = per.get(w, 0) + 1
                builds.append(float(m.group(1)))
                moves.append(float(m.group(2)) + float(m.group(3)))
    n = max(len(builds), 1)
    line += (f"; workers built {len(builds)} ({', '.join(f'{w} {c}' for w, c in sorted(per.items()))}),"
             f" {sum(builds) / n:.2f} s per build, segment download + index upload "
             f"{sum(moves) / n:.2f} s per build")
print(line)
PY
    "$bin" cluster down --dir "$work/cluster" >/dev/null
    rm -rf "$work/cluster"
done
