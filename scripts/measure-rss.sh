#!/usr/bin/env bash
# scripts/measure-rss.sh [BUILD...]: what a CPU user pays at start-up (issue 12), per build tree
# (default: build). For each BUILD:
#   - peak RSS of `BUILD/sextant --help` (/usr/bin/time -f %M, median of 5 runs);
#   - VmHWM (and VmRSS) of an idle `BUILD/sextant serve` on an empty data directory, read from
#     /proc/PID/status half a second after GET /readyz first answers 200; then SIGTERM.
# Prints one line per build; the README's GPU section has the figures of a CUDA-enabled build
# against a -DSX_CUDA=OFF one. Needs curl and GNU time (/usr/bin/time).
set -euo pipefail
[ $# -eq 0 ] && set -- build
for B in "$@"; do
    bin=$B/sextant
    [ -x "$bin" ] || { echo "$bin: not built" >&2; exit 1; }
    runs=()
    for _ in 1 2 3 4 5; do
        runs+=("$(/usr/bin/time -f %M "$bin" --help 2>&1 >/dev/null | tail -n 1)")
    done
    med=$(printf '%s\n' "${runs[@]}" | sort -n | sed -n 3p)
    d=$(mktemp -d)
    port=$((20000 + RANDOM % 20000))
    "$bin" serve --data "$d" --port "$port" >"$d.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do
        curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    sleep 0.5
    hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
    kill -TERM "$pid"
    wait "$pid" || true
    rm -rf "$d" "$d.log"
    cuda="no CUDA"
    grep -q '^CMAKE_CUDA_COMPILER:.*nvcc' "$B/CMakeCache.txt" 2>/dev/null && cuda="CUDA"
    echo "$B ($cuda): sextant --help peak RSS ${med} kB (runs ${runs[*]}); idle sextant serve VmHWM ${hwm} kB, VmRSS ${rss} kB"
done
