#!/usr/bin/env bash
# demo.sh: `make demo`. Installs Debian's dataset-fashion-mnist if missing, then runs the
# Fashion-MNIST case of `sextant bench` end to end (60,000 base / 10,000 queries, 784-d, L2;
# ann-benchmarks' split):
#   ingest (insert_duration), HNSW build (optimize_duration), the single-thread recall@10 / QPS
#   sweep over ef side by side with hnswlib and FAISS when their peer shims were built, the
#   serial pass at k=100 (recall@10/@100, NDCG, p50/p95/p99), then concurrent search at 1, 5,
#   10 and 20 threads (DEMO_DURATION seconds each, Milvus Go-benchmark lines), and writes
#   BUILD/demo.json (docs/BENCH-RESULTS.md) and the HTML report BUILD/demo.html.
#
# Usage: ./tools/demo.sh [BUILD_DIR]   (default: build; the sextant binary is BUILD_DIR/sextant)
# Environment: DEMO_DURATION (seconds per concurrency level, default 5),
#              DEMO_CONCURRENCY (default 1,5,10,20).
#
# Ground truth: ../shared/data/fashion-mnist/ relative to the repository root (exact k=100 ids and
# Euclidean distances, distance-threshold recall). When those files are absent, the bench
# computes the ground truth through the engine on the first run and caches it in BUILD_DIR.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build}"
case "$build" in
    /*) ;;
    *) build="$root/$build" ;;
esac
bin="$build/sextant"
if [ ! -x "$bin" ]; then
    echo "demo: $bin not found; run 'make' first" >&2
    exit 1
fi

SX_DEPS_DEMO=1 "$root/tools/deps.sh"

data=/usr/share/datasets/fashion-mnist
base="$data/train-images-idx3-ubyte.gz"
query="$data/t10k-images-idx3-ubyte.gz"
for f in "$base" "$query"; do
    if [ ! -r "$f" ]; then
        echo "demo: $f is missing (is dataset-fashion-mnist installed?)" >&2
        exit 1
    fi
done

shared="$root/../shared/data/fashion-mnist"
gt="$shared/fmnist_groundtruth_l2_k100.ivecs"
gt_dist="$shared/fmnist_groundtruth_l2_k100_dist.fvecs"
if [ ! -r "$gt" ] || [ ! -r "$gt_dist" ]; then
    echo "demo: shared ground truth not found in $shared;"
    echo "demo: computing it through the engine (cached in $build for the next run)"
    gt="$build/fmnist_groundtruth_l2_k100.ivecs"
    gt_dist="$build/fmnist_groundtruth_l2_k100_dist.fvecs"
    # Ids and distances must come from the same computation.
    if [ ! -r "$gt" ] || [ ! -r "$gt_dist" ]; then
        rm -f "$gt" "$gt_dist"
    fi
fi

json="$build/demo.json"
html="$build/demo.html"
echo "demo: sextant bench on Fashion-MNIST (a few minutes on 2 cores)"
"$bin" bench \
    --base "$base" \
    --query "$query" \
    --gt "$gt" \
    --gt-dist "$gt_dist" \
    --metric l2 \
    --index hnsw \
    --param M=16 \
    --param efConstruction=200 \
    --search-param ef=10,20,40,80,120,200 \
    --k 10 \
    --threads 2 \
    --concurrency "${DEMO_CONCURRENCY:-1,5,10,20}" \
    --duration "${DEMO_DURATION:-5}" \
    --interval 5 \
    --json "$json" \
    --html "$html"
echo
echo "demo: results in $json"
echo "demo: report in $html"
