#!/usr/bin/env bash
# peak_memory.sh: the peak-memory table of issue 14, without a limit (a benchmark, not a test):
# `sextant import --index diskann` (ingest + seal + merge + build) and `sextant search` on the
# reopened collection, as separate processes, on generated data (`sextant bench generate`).
# Prints the import's peak RSS (/usr/bin/time), the search's VmHWM (open + queries) and its
# anonymous memory (RssAnon sampled every 20 ms from /proc while it runs), each also as a share of
# the raw vector bytes, and the search's recall@10 against exact ground truth.
#
# Usage: bench/peak_memory.sh N DIM [WORK]     e.g. bench/peak_memory.sh 400000 192
# Env:   BUILD (default build), NQ (200), SWEEP (search_list=100,300).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ $# -lt 2 ]; then
    sed -n '2,11p' "$0"
    exit 2
fi
n=$1 dim=$2
work="${3:-/var/tmp/sextant-peak-$n-$dim}"
build="${BUILD:-build}"
case $build in /*) ;; *) build="$root/$build" ;; esac
bin="$build/sextant"
[ -x /usr/bin/time ] || { echo "peak_memory: /usr/bin/time missing (apt-get install time)"; exit 1; }
raw=$((n * dim * 4))
"$bin" bench generate --synthetic "$n,$dim" --nq "${NQ:-200}" --out "$work/data"
rm -rf "$work/db"
/usr/bin/time -f '%M %e' -o "$work/import.time" \
    "$bin" import --data "$work/db" --collection c --file "$work/data/base.fvecs" --index diskann
read -r imp_kb imp_s <"$work/import.time"
"$bin" search --data "$work/db" --collection c --query "$work/data/query.fvecs" \
    --gt "$work/data/gt.ivecs" --gt-dist "$work/data/gt-dist.fvecs" \
    --sweep "${SWEEP:-search_list=100,300}" >"$work/search.out" 2>"$work/search.err" &
pid=$!
anon=0
while kill -0 "$pid" 2>/dev/null; do
    a=$(awk '/^RssAnon:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
    [ -n "$a" ] && [ "$a" -gt "$anon" ] && anon=$a
    sleep 0.02
done
wait "$pid"
cat "$work/search.out"
hwm=$(awk '/VmHWM/ { print $(NF-2) }' "$work/search.err")
pct() { awk -v b="$1" -v r="$raw" 'BEGIN { printf "%.0f%%", 100 * b / r }'; }
echo
echo "$n x $dim float32, $(awk -v r="$raw" 'BEGIN { printf "%.0f", r / 1e6 }') MB raw," \
    "$(nproc) cores, $(date -u +%Y-%m-%d), $(git -C "$root" rev-parse --short HEAD)"
printf '%-58s %10s %6s\n' phase "peak" "of raw"
printf '%-58s %7.0f MB %6s\n' "import --index diskann (ingest + seal + merge + build), RSS" \
    "$(awk -v k="$imp_kb" 'BEGIN { print k * 1024 / 1e6 }')" "$(pct $((imp_kb * 1024)))"
printf '%-58s %7.0f MB %6s\n' "search on the reopened collection, VmHWM (open + queries)" \
    "$(awk -v m="$hwm" 'BEGIN { print m * 1048576 / 1e6 }')" \
    "$(pct "$(awk -v m="$hwm" 'BEGIN { printf "%d", m * 1048576 }')")"
printf '%-58s %7.0f MB %6s\n' "the same, anonymous memory (max RssAnon)" \
    "$(awk -v k="$anon" 'BEGIN { print k * 1024 / 1e6 }')" "$(pct $((anon * 1024)))"
echo "import wall time ${imp_s} s"
