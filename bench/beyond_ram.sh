#!/usr/bin/env bash
# beyond_ram.sh: a DISKANN collection many times larger than the memory it is given (issue 14; a
# benchmark, not a test). Generated data with exact ground truth (`sextant bench generate`), then
# each phase as its own process inside a fresh memory cgroup of LIMIT (v2 memory.max or v1
# memory.limit_in_bytes, swap off), so the whole process, not only the index, must fit:
#
#   import   `sextant import` of base.fvecs (insert path: WAL, growing segments, seal)
#   build    `sextant index --index diskann` (the partitioned Vamana build within the budget)
#   search   `sextant search --gt --gt-dist --sweep search_list=...` on the reopened collection
#
# with SOURCE=s3 the import is the bulk-import job instead, reading base.fvecs from s3rver
# (`sextant import --job --file s3://...`; the seed pipeline: raw file in a bucket -> import ->
# build -> query-ready). Per phase it prints wall seconds, the cgroup's peak (memory.peak or
# memory.max_usage_in_bytes: RSS + page cache charged to the group), the process's VmHWM
# (/usr/bin/time), bytes read and written by the process (/proc/PID/io via `time`'s block
# counters) and whether the OOM killer fired; the search phase adds recall@10, QPS, p50/p99 and
# I/Os per query per search_list. Ends with a summary table and exits 1 if any phase failed or
# was OOM-killed.
#
# Usage: bench/beyond_ram.sh N DIM LIMIT            e.g. bench/beyond_ram.sh 1000000 192 146M
# Env:   BUILD (build dir, default build), WORK (default /var/tmp/sextant-beyond: data/ is kept
#        and reused when it matches, db/ is rebuilt), NQ (1000), SWEEP (search_list=...),
#        PARAMS (extra --param of the build, e.g. "max_degree=32"), THREADS (search threads, 1),
#        SOURCE (local | s3), KEEP_DB=1 (skip import + build when db/ exists),
#        SEGMENT_MAX (the import's --segment-max; default: seal at 256M, merged up to 2G by
#        `sextant index --index diskann`).
# Needs root (cgroups) and /usr/bin/time (Debian package time; tools/deps.sh installs it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ $# -lt 3 ]; then
    sed -n '2,27p' "$0"
    exit 2
fi
n=$1 dim=$2 limit=$3
build="${BUILD:-build}"
case $build in /*) ;; *) build="$root/$build" ;; esac
bin="$build/sextant"
work="${WORK:-/var/tmp/sextant-beyond}"
nq="${NQ:-1000}"
sweep="${SWEEP:-search_list=10,20,50,100,200}"
threads="${THREADS:-1}"
source="${SOURCE:-local}"
[ -x "$bin" ] || cmake --build "$build" --target sextant
[ -x /usr/bin/time ] || { echo "beyond_ram: /usr/bin/time missing (apt-get install time)"; exit 1; }

to_bytes() {
    local v=$1 num unit
    num=${v%%[KkMmGg]*} unit=${v#"$num"}
    case $unit in
    "") echo "$num" ;; K | k) echo $((num << 10)) ;; M | m) echo $((num << 20)) ;;
    G | g) echo $((num << 30)) ;; *) echo "bad size $v" >&2; exit 2 ;;
    esac
}
limit_b=$(to_bytes "$limit")
raw_b=$((n * dim * 4))

# ---------------------------------------------------------------- cgroup per phase
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    cgv=2
    cgroot=/sys/fs/cgroup
    grep -qw memory $cgroot/cgroup.subtree_control 2>/dev/null ||
        echo +memory >$cgroot/cgroup.subtree_control
elif [ -d /sys/fs/cgroup/memory ]; then
    cgv=1
    cgroot=/sys/fs/cgroup/memory
else
    echo "beyond_ram: no memory cgroup (v1 or v2) is writable here"
    exit 1
fi
cg=""
cg_make() { # a fresh group per phase, so its peak is the phase's
    cg="$cgroot/sx-beyond-$$-$1"
    mkdir "$cg"
    if [ $cgv = 2 ]; then
        echo "$limit_b" >"$cg/memory.max"
        echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
    else
        echo "$limit_b" >"$cg/memory.limit_in_bytes"
        echo "$limit_b" >"$cg/memory.memsw.limit_in_bytes" 2>/dev/null || true
    fi
}
cg_peak() {
    if [ $cgv = 2 ]; then cat "$cg/memory.peak" 2>/dev/null || echo 0
    else cat "$cg/memory.max_usage_in_bytes"; fi
}
cg_ooms() {
    if [ $cgv = 2 ]; then awk '$1 == "oom_kill" { print $2 }' "$cg/memory.events"
    else awk '$1 == "oom_kill" { print $2 }' "$cg/memory.oom_control"; fi
}
cg_drop() { [ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true; cg=""; }
s3pid=""
cleanup() {
    cg_drop
    [ -n "$s3pid" ] && kill "$s3pid" 2>/dev/null || true
}
trap cleanup EXIT

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
declare -a rows=()
failed=0
ready_s=0 # import + build: raw file -> query-ready
# phase NAME CMD...: runs CMD in a fresh group, records wall s, peaks, I/O, OOM kills
phase() {
    local name=$1
    shift
    cg_make "$name"
    local tf="$work/$name.time" t0 t1 rc=0
    t0=$(date +%s.%N)
    sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' sh "$cg" \
        /usr/bin/time -f '%M %I %O' -o "$tf" "$@" || rc=$?
    t1=$(date +%s.%N)
    local peak ooms hwm_k in_b out_b
    peak=$(cg_peak) ooms=$(cg_ooms)
    read -r hwm_k in_b out_b < <(tail -1 "$tf" | awk '{ print $1, $2 * 512, $3 * 512 }') || true
    local wall
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    [ "$name" != search ] && ready_s=$(awk -v s="$ready_s" -v w="$wall" 'BEGIN { print s + w }')
    rows+=("$(printf '%-8s %8s s %10s MiB %10s MiB %9.1f MB %9.1f MB %4s %5s' "$name" "$wall" \
        "$(mib "$peak")" "$(mib $((hwm_k * 1024)))" \
        "$(awk -v b="$in_b" 'BEGIN { print b / 1e6 }')" \
        "$(awk -v b="$out_b" 'BEGIN { print b / 1e6 }')" "$ooms" "$rc")")
    echo "beyond_ram: $name: ${wall} s, cgroup peak $(mib "$peak") MiB, VmHWM $(mib $((hwm_k * 1024))) MiB, OOM kills $ooms, exit $rc"
    if [ "$rc" != 0 ] || [ "$ooms" != 0 ]; then failed=1; fi
    cg_drop
}

mkdir -p "$work"
echo "beyond_ram: $n x $dim float32 = $(mib $raw_b) MiB raw, limit $(mib "$limit_b") MiB" \
    "($(awk -v l="$limit_b" -v r="$raw_b" 'BEGIN { printf "%.1f", 100 * l / r }')% of raw)," \
    "cgroup v$cgv, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$root" rev-parse --short HEAD)"
"$bin" bench generate --synthetic "$n,$dim" --nq "$nq" --out "$work/data"
data="$work/data"
db="$work/db"
id_offset=0
if [ "${KEEP_DB:-0}" = 1 ] && [ -d "$db" ]; then
    echo "beyond_ram: KEEP_DB=1: searching the existing $db"
else
    rm -rf "$db"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    if [ "$source" = s3 ]; then
        node_dir="$root/tests/e2e/node"
        cli="$node_dir/node_modules/@20minutes/s3rver/lib/cli.js"
        [ -f "$cli" ] || (cd "$node_dir" && npm ci --silent)
        s3dir="$work/s3rver"
        rm -rf "$s3dir" && mkdir -p "$s3dir"
        port=$((20000 + $$ % 20000))
        node --openssl-legacy-provider -e "require('$cli').parseAsync(['node','s3rver']
            .concat(process.argv.slice(1))).catch(e=>{console.error(e);process.exit(1)})" \
            -- -d "$s3dir" -a 127.0.0.1 -p "$port" --silent &
        s3pid=$!
        export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
        s3=(curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user S3RVER:S3RVER
            -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
        for _ in $(seq 50); do "${s3[@]}" -X PUT "http://127.0.0.1:$port/raw" && break; sleep 0.2; done
        t0=$(date +%s.%N)
        "${s3[@]}" -T "$data/base.fvecs" "http://127.0.0.1:$port/raw/base.fvecs" ||
            { echo "beyond_ram: upload to s3rver failed"; exit 1; }
        echo "beyond_ram: uploaded base.fvecs to s3rver in" \
            "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
        SEXTANT_S3_ENDPOINT="http://127.0.0.1:$port" phase import "$bin" import --job \
            --data "$db" --collection c --file "s3://raw/base.fvecs" --dim "$dim"
        id_offset=1 # the job's collection has auto_id keys, starting at 1
    else
        seg=()
        [ -n "${SEGMENT_MAX:-}" ] && seg=(--segment-max "$SEGMENT_MAX")
        phase import "$bin" import --data "$db" --collection c --file "$data/base.fvecs" \
            "${seg[@]}"
    fi
    extra=()
    for p in ${PARAMS:-}; do extra+=(--param "$p"); done
    # pages cached by an earlier phase stay charged to its (removed) group: drop them, so each
    # phase's reads are charged to its own group
    sync
    echo 3 >/proc/sys/vm/drop_caches
    phase build "$bin" index --data "$db" --collection c --index diskann "${extra[@]}"
fi
sync
echo 3 >/proc/sys/vm/drop_caches
phase search "$bin" search --data "$db" --collection c --query "$data/query.fvecs" \
    --gt "$data/gt.ivecs" --gt-dist "$data/gt-dist.fvecs" --gt-id-offset "$id_offset" \
    --k 10 --sweep "$sweep" --threads "$threads"
echo
printf '%-8s %10s %14s %14s %12s %12s %4s %5s\n' phase wall "cgroup peak" VmHWM read written oom exit
for r in "${rows[@]}"; do echo "$r"; done
du -sh "$db" | awk '{ print "database on disk: " $1 }'
[ "${KEEP_DB:-0}" = 1 ] || echo "raw file -> query-ready (import + build, ${source}): ${ready_s} s"

exit $failed
