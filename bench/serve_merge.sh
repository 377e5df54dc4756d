#!/usr/bin/env bash
# bench/serve_merge.sh BUILD_DIR [DURATION_S] [CONCURRENCY]: the effect of merging concurrent small
# searches in `sextant serve` (issue 4). Imports Fashion-MNIST (60k x 784, Debian's
# dataset-fashion-mnist) with an HNSW index (M=16, efConstruction=200; SX_BENCH_INDEX=flat for FLAT),
# then serves it twice on the
# same data, merging on (the default) and off (--no-merge), and drives each with
# `sextant bench --target` (nq=1, top-10, ef=64) at each concurrency level. Prints one table:
# QPS, p50, p99 and recall per level, merging on vs off, and the QPS ratio.
# Not a test: run by hand; the figures in the README come from it.
set -euo pipefail
build="${1:?usage: bench/serve_merge.sh BUILD_DIR [DURATION_S] [CONCURRENCY]}"
dur="${2:-15}"
conc="${3:-1,10,20}"
bin="$(cd "$build" && pwd)/sextant"
root="$(cd "$(dirname "$0")/.." && pwd)"
data=/usr/share/datasets/fashion-mnist
gt="$root/../shared/data/fashion-mnist/fmnist_groundtruth_l2_k100.ivecs"
work="${SX_BENCH_DIR:-/tmp/sx_serve_merge}"
port="${SX_BENCH_PORT:-19731}"
threads="${SX_SERVE_THREADS:-}"
index="${SX_BENCH_INDEX:-hnsw}" # hnsw (M=16, efConstruction=200) or flat
work="$work/$index"
mkdir -p "$work"
if [ ! -d "$work/db/collections/fmnist" ]; then
    rm -rf "$work/db"
    iparams=()
    [ "$index" = hnsw ] && iparams=(--param M=16 --param efConstruction=200)
    "$bin" import --data "$work/db" --collection fmnist --file "$data/train-images-idx3-ubyte.gz" \
        --index "$index" "${iparams[@]}" >&2
fi
run() { # $1 = label, $2.. = extra serve flags
    local label="$1"; shift
    local targs=()
    [ -n "$threads" ] && targs=(--threads "$threads")
    "$bin" serve --data "$work/db" --port "$port" --quiet "${targs[@]}" "$@" &
    local pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/livez" >/dev/null && break; sleep 0.1; done
    "$bin" bench --target "http://127.0.0.1:$port" --collection fmnist \
        --query "$data/t10k-images-idx3-ubyte.gz" --gt "$gt" --concurrency "$conc" \
        --duration "$dur" --warmup 2 --interval "$dur" --limit 10 --search-params '{"ef":64}' \
        --json "$work/$label.json" >&2
    kill -TERM "$pid"; wait "$pid"
}
run merge_on
run merge_off --no-merge
python3 - "$work/merge_on.json" "$work/merge_off.json" <<'PY'
import json, sys
on, off = (json.load(open(p)) for p in sys.argv[1:3])
print("| concurrency | QPS merging on | QPS off | ratio | p50 on / off (ms) | p99 on / off (ms) | recall@10 on / off |")
print("|---|---|---|---|---|---|---|")
for a, b in zip(on["levels"], off["levels"]):
    la, lb = a["latency_ms"], b["latency_ms"]
    print(f'| {a["concurrency"]} | {a["qps"]:.0f} | {b["qps"]:.0f} | {a["qps"]/b["qps"]:.2f}x | '
          f'{la["p50"]:.2f} / {lb["p50"]:.2f} | {la["p99"]:.2f} / {lb["p99"]:.2f} | '
          f'{a.get("recall", 0):.4f} / {b.get("recall", 0):.4f} |')
PY
