#!/usr/bin/env bash
# run_suite.sh: the benchmark runs behind the README's tables, each index side by side with its
# peers (hnswlib, FAISS) in the same run. Writes JSON + text to OUT (default build/bench-results).
# Usage: bench/run_suite.sh [BUILD_DIR] [quick|full]
#   quick: BIGANN-10k for every index type (a few minutes on 2 cores)
#   full:  + Fashion-MNIST (60k x 784) and a generated 1M x 128 set (tens of minutes); the
#          graph runs on Fashion-MNIST build and search on one pinned core (issue 18's setting)
# Pinning (issue 18): every run is pinned with taskset. A run without --threads (one search
# thread, one build thread) runs on one core, PIN_CPU (default: the last online CPU, away from
# CPU 0's interrupts); a run with --threads N on CPUs 0..N-1 (its single-thread pass may then
# move between those N). Each run's header line says where it ran.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build}"
mode="${2:-quick}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
bin="$build/sextant"
out="${OUT:-$build/bench-results}"
mkdir -p "$out"
shared="$root/../shared/data"
big="--base $shared/bigann10k/bigann10k_base.bvecs --query $shared/bigann10k/bigann10k_query.bvecs --gt $shared/bigann10k/bigann10k_groundtruth_l2_k100.ivecs"
fm="--base /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz --query /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz --gt $shared/fashion-mnist/fmnist_groundtruth_l2_k100.ivecs --gt-dist $shared/fashion-mnist/fmnist_groundtruth_l2_k100_dist.fvecs"

ncpu="$(nproc)"
pin_one="${PIN_CPU:-$((ncpu - 1))}"

run() { # name, args...
    local name="$1"; shift
    local threads=1 prev="" a cpus
    for a in "$@"; do
        [ "$prev" = --threads ] && threads="$a"
        prev="$a"
    done
    [ "$threads" -gt "$ncpu" ] && threads="$ncpu"
    if [ "$threads" -le 1 ]; then cpus="$pin_one"; else cpus="0-$((threads - 1))"; fi
    echo "== $name: taskset -c $cpus sextant bench $* (pinned: $threads thread(s) on CPU $cpus)" |
        tee "$out/$name.txt"
    taskset -c "$cpus" "$bin" bench "$@" --json "$out/$name.json" 2>&1 | tee -a "$out/$name.txt"
}

run big-hnsw     $big --index hnsw --param M=16 --param efConstruction=200 --search-param ef=10,16,24,32,48,64 --runs 5
run big-hnsw_sq  $big --index hnsw_sq --param M=16 --param efConstruction=200 --search-param ef=10,16,24,32,48,64 --runs 5
run big-ivf_flat $big --index ivf_flat --param nlist=100 --search-param nprobe=1,2,4,6,8,12,16 --runs 5
run big-ivf_sq8  $big --index ivf_sq8 --param nlist=100 --search-param nprobe=1,2,4,6,8,12,16 --runs 5
run big-ivf_pq   $big --index ivf_pq --param nlist=100 --param m=32 --search-param nprobe=1,2,4,6,8,12,16 --search-param refine=true --search-param refine_k=4 --runs 5
run big-diskann  $big --index diskann --search-param search_list=10,15,20,30,50,100 --runs 3

if [ "$mode" = full ]; then
    run fm-hnsw     $fm --index hnsw --param M=16 --param efConstruction=200 --search-param ef=10,12,15,20,40,80,120 --nq 2000 --runs 3
    run fm-hnsw_sq  $fm --index hnsw_sq --param M=16 --param efConstruction=200 --search-param ef=10,12,15,20,40,80,120 --nq 2000 --runs 3
    run fm-ivf_flat $fm --index ivf_flat --param nlist=256 --search-param nprobe=1,2,3,4,6,8,12 --threads 2 --nq 2000
    run fm-ivf_pq   $fm --index ivf_pq --param nlist=256 --param m=56 --search-param nprobe=2,3,4,6,8,12 --search-param refine=true --search-param refine_k=4 --threads 2 --nq 2000
    run fm-diskann  $fm --index diskann --search-param search_list=10,20,30,50,100 --threads 2 --nq 2000
    run syn1m-ivf_flat --synthetic 1000000,128 --nq 1000 --index ivf_flat --param nlist=1024 --search-param nprobe=4,8,16,24,32,48 --threads 2
    run syn1m-ivf_pq   --synthetic 1000000,128 --nq 1000 --index ivf_pq --param nlist=1024 --param m=32 --search-param nprobe=8,16,24,32,48 --search-param refine=true --search-param refine_k=4 --threads 2
fi
echo "results in $out"
