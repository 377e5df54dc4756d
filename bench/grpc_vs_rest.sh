#!/usr/bin/env bash
# bench/grpc_vs_rest.sh BUILD_DIR [DURATION_S] [CONCURRENCY]: search over REST and over gRPC on the
# same port and the same collection (issue 15). Imports Fashion-MNIST (60k x 784, Debian's
# dataset-fashion-mnist) with an HNSW index (M=16, efConstruction=200) once, then serves it twice,
# merging of concurrent small searches on (the default) and off (--no-merge), and drives each with
# `sextant bench --target http://...` and `--target grpc://...` (nq=1, top-10, ef=64, the Milvus Go
# benchmark's load: N client threads back to back) at each concurrency level. Prints one table:
# QPS, p99 and recall per protocol, merging and level. Client and server share the machine.
# Not a test: run by hand; the README's table comes from it.
set -euo pipefail
build="${1:?usage: bench/grpc_vs_rest.sh BUILD_DIR [DURATION_S] [CONCURRENCY]}"
dur="${2:-15}"
conc="${3:-1,10,20}"
bin="$(cd "$build" && pwd)/sextant"
root="$(cd "$(dirname "$0")/.." && pwd)"
data=/usr/share/datasets/fashion-mnist
gt="$root/../shared/data/fashion-mnist/fmnist_groundtruth_l2_k100.ivecs"
work="${SX_BENCH_DIR:-/tmp/sx_grpc_vs_rest}"
port="${SX_BENCH_PORT:-19732}"
mkdir -p "$work"
if [ ! -d "$work/db/collections/fmnist" ]; then
    rm -rf "$work/db"
    "$bin" import --data "$work/db" --collection fmnist --file "$data/train-images-idx3-ubyte.gz" \
        --index hnsw --param M=16 --param efConstruction=200 >&2
fi
run() { # $1 = label, $2 = serve flag or ""
    local label="$1" flag="$2"
    local sargs=()
    [ -n "$flag" ] && sargs=("$flag")
    "$bin" serve --data "$work/db" --port "$port" --quiet "${sargs[@]}" &
    local pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/livez" >/dev/null && break; sleep 0.1; done
    for proto in http grpc; do
        "$bin" bench --target "$proto://127.0.0.1:$port" --collection fmnist \
            --query "$data/t10k-images-idx3-ubyte.gz" --gt "$gt" --concurrency "$conc" \
            --duration "$dur" --warmup 2 --interval "$dur" --limit 10 --search-params '{"ef":64}' \
            --json "$work/${label}_$proto.json" >&2
    done
    kill -TERM "$pid"; wait "$pid"
}
run merge_on ""
run merge_off --no-merge
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
r = {(m, p): json.load(open(f"{w}/{m}_{p}.json")) for m in ("merge_on", "merge_off") for p in ("http", "grpc")}
print("| concurrency | merging | REST QPS | gRPC QPS | gRPC/REST | REST p99 (ms) | gRPC p99 (ms) | recall@10 REST / gRPC |")
print("|---|---|---|---|---|---|---|---|")
for m in ("merge_on", "merge_off"):
    for a, b in zip(r[(m, "http")]["levels"], r[(m, "grpc")]["levels"]):
        print(f'| {a["concurrency"]} | {"on" if m == "merge_on" else "off"} | {a["qps"]:.0f} | {b["qps"]:.0f} | '
              f'{b["qps"]/a["qps"]:.2f}x | {a["latency_ms"]["p99"]:.2f} | {b["latency_ms"]["p99"]:.2f} | '
              f'{a.get("recall", 0):.4f} / {b.get("recall", 0):.4f} |')
PY
