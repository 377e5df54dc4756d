#!/usr/bin/env bash
# bench/vectypes_bench.sh BUILD_DIR [args...]: float16 / bfloat16 / binary vectors against float32
# and FAISS (bench/vectypes_bench.c), the whole run pinned to one core with taskset (core 1 when
# the machine has two or more, else 0): builds with one thread (Sextant's and FAISS's alike) and
# single-threaded searches. Extra args go to vectypes_bench (--n, --nq, --dim, --reps, --seed).
set -euo pipefail
build=${1:-build}
shift || true
cmake --build "$build" --target vectypes_bench >/dev/null
core=0
[ "$(nproc)" -ge 2 ] && core=1
echo "vectypes_bench: pinned with taskset -c $core (one thread), $(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
OMP_WAIT_POLICY=passive taskset -c "$core" "$build/vectypes_bench" --threads 1 "$@"
