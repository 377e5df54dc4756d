#!/usr/bin/env bash
# s3_vs_local.sh: the object-storage benchmark of issue 5 (a benchmark, not a test). The same data
# is benched twice with `sextant bench`: once with the local backend (segments and index files in
# the data directory) and once with S3 (--storage s3://BUCKET/PREFIX against s3rver, started here
# on a free loopback port from tests/e2e/node/node_modules). Prints, for both: load time (insert +
# optimize = index build), query QPS per search setting, and the I/O profile per phase and backend
# (each run's full table is in its .txt; the comparison below sums it up). A third run, "import",
# is the seed pipeline: the raw base file is uploaded to the bucket (curl, SigV4) and
# `sextant bench --import s3://BUCKET/raw/FILE` loads it with a bulk-import job, merges, builds
# and queries: its load is raw file in the bucket -> query-ready (NO_IMPORT=1 skips it).
#
# Usage: bench/s3_vs_local.sh [BUILD_DIR] [--synthetic] [-- extra sextant bench args]
#   default data: BIGANN-10k (../shared/data/bigann10k); --synthetic: generated 200k x 128 (sx-gmm-1)
#   env: INDEX (default diskann), SWEEP (default search_list=10,20,50,100 for diskann, ef=... for
#        hnsw), RUNS (default 3), OUT (default BUILD/bench-results/s3_vs_local),
#        S3_ENDPOINT (use that server instead of starting s3rver; then AWS_ACCESS_KEY_ID /
#        AWS_SECRET_ACCESS_KEY must be set and BUCKET must exist), BUCKET (default bench)
# Needs: node (s3rver) with `npm ci` done in tests/e2e/node (tools/deps.sh does it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="build"
synthetic=0
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --synthetic) synthetic=1 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) build="$1" ;;
    esac
    shift
done
case "$build" in /*) ;; *) build="$root/$build" ;; esac
bin="$build/sextant"
[ -x "$bin" ] || { echo "s3_vs_local: $bin not found (build first: make)" >&2; exit 2; }
out="${OUT:-$build/bench-results/s3_vs_local}"
mkdir -p "$out"
index="${INDEX:-diskann}"
runs="${RUNS:-3}"
bucket="${BUCKET:-bench}"
case "$index" in
diskann) sweep="${SWEEP:-search_list=10,20,50,100}" ;;
hnsw|hnsw_sq) sweep="${SWEEP:-ef=10,20,40,80}" ;;
ivf_*) sweep="${SWEEP:-nprobe=1,4,8,16}" ;;
*) sweep="${SWEEP:-}" ;;
esac

shared="$root/../shared/data"
if [ "$synthetic" = 1 ]; then
    data=(--synthetic 200000,128 --nq 1000 --cache "$build/bench-cache")
    label="synthetic 200k x 128"
    gen="$build/bench-cache/s3_vs_local-200k"
    mkdir -p "$build/bench-cache"
    "$bin" bench generate --synthetic 200000,128 --nq 1000 --out "$gen" >/dev/null
    raw="$gen/base.fvecs"
    imp_data=(--query "$gen/query.fvecs" --gt "$gen/gt.ivecs")
else
    b10k="$shared/bigann10k"
    if [ ! -f "$b10k/bigann10k_base.bvecs" ]; then
        echo "s3_vs_local: $b10k/bigann10k_base.bvecs not found; use --synthetic" >&2
        exit 2
    fi
    data=(--base "$b10k/bigann10k_base.bvecs" --query "$b10k/bigann10k_query.bvecs"
          --gt "$b10k/bigann10k_groundtruth_l2_k100.ivecs")
    label="BIGANN-10k"
    raw="$b10k/bigann10k_base.bvecs"
    imp_data=(--query "$b10k/bigann10k_query.bvecs" --gt "$b10k/bigann10k_groundtruth_l2_k100.ivecs")
fi
common=("${data[@]}" --index "$index" --runs "$runs" --no-peers)
[ -n "$sweep" ] && common+=(--search-param "$sweep")
common+=("${extra[@]}")

work="$(mktemp -d "${TMPDIR:-/tmp}/sx-s3bench-XXXXXX")"
s3pid=""
cleanup() {
    if [ -n "$s3pid" ]; then kill "$s3pid" 2>/dev/null || true; wait "$s3pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# ---------------------------------------------------------------- s3rver
endpoint="${S3_ENDPOINT:-}"
if [ -z "$endpoint" ]; then
    mod="$root/tests/e2e/node/node_modules/@20minutes/s3rver"
    command -v node >/dev/null || { echo "s3_vs_local: node not found" >&2; exit 2; }
    [ -d "$mod" ] || { echo "s3_vs_local: $mod missing: run 'npm ci' in tests/e2e/node" >&2; exit 2; }
    mkdir -p "$work/s3rver"
    # port 0: the kernel picks a free port; s3rver reports it once listening
    node -e '
const S3rver = require(process.argv[1]);
new S3rver({ address: "127.0.0.1", port: 0, silent: true, directory: process.argv[2],
             configureBuckets: [{ name: process.argv[3], configs: [] }] })
  .run().then(({ port }) => console.log("PORT " + port))
  .catch((e) => { console.error(e); process.exit(1); });
' "$mod" "$work/s3rver" "$bucket" >"$work/s3rver.log" 2>&1 &
    s3pid=$!
    port=""
    for _ in $(seq 1 100); do
        port="$(sed -n 's/^PORT \([0-9]*\)$/\1/p' "$work/s3rver.log")"
        [ -n "$port" ] && break
        kill -0 "$s3pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$port" ]; then
        echo "s3_vs_local: s3rver did not start:" >&2
        cat "$work/s3rver.log" >&2
        exit 1
    fi
    endpoint="http://127.0.0.1:$port"
    export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER # s3rver's built-in account
fi

# ---------------------------------------------------------------- runs
run() { # name, args...
    local name="$1"; shift
    echo "== $name: sextant bench $*" | tee "$out/$name.txt"
    "$bin" bench "$@" --json "$out/$name.json" 2>&1 | tee -a "$out/$name.txt"
}
run local "${common[@]}" --data "$work/local"
run s3 "${common[@]}" --data "$work/s3" --storage "s3://$bucket/run-$$" \
    --s3-endpoint "$endpoint" --s3-region us-east-1
imp_json=""
if [ "${NO_IMPORT:-0}" != 1 ]; then
    key="raw-$$/$(basename "$raw")"
    curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
        -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$raw" "$endpoint/$bucket/$key" ||
        { echo "s3_vs_local: upload of $raw failed" >&2; exit 1; }
    imp=(--import "s3://$bucket/$key" "${imp_data[@]}" --index "$index" --runs "$runs" --no-peers)
    [ -n "$sweep" ] && imp+=(--search-param "$sweep")
    run import "${imp[@]}" "${extra[@]}" --data "$work/import" --s3-endpoint "$endpoint" \
        --s3-region us-east-1
    imp_json="$out/import.json"
fi

# ---------------------------------------------------------------- comparison
node - "$out/local.json" "$out/s3.json" "$label" "$endpoint" "$imp_json" <<'EOF' | tee "$out/summary.txt"
const fs = require("fs");
const [lp, sp, label, endpoint, ip] = process.argv.slice(2);
const L = JSON.parse(fs.readFileSync(lp)), S = JSON.parse(fs.readFileSync(sp));
const I = ip ? JSON.parse(fs.readFileSync(ip)) : null;
const f = (v, d = 2) => (v === null || v === undefined ? "-" : Number(v).toFixed(d));
const hb = (n) => {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return i ? n.toFixed(1) + " " + u[i] : n + " B";
};
const ratio = (a, b) => (a > 0 && b > 0 ? (a / b).toFixed(2) : "-");
console.log(`\ns3_vs_local: ${label}, index ${L.index_type}, ${L.n} x ${L.dim}, ${L.nq} queries; ` +
            `S3 = ${S.storage} at ${endpoint}`);
console.log("\nload time (s)      local        s3    s3/local");
for (const [k, name] of [["insert_s", "insert"], ["build_s", "optimize"], ["load_s", "load"]])
  console.log(`${name.padEnd(14)} ${f(L[k]).padStart(9)} ${f(S[k]).padStart(9)} ${ratio(S[k], L[k]).padStart(11)}`);
if (I && I.import) {
  const m = I.import;
  console.log(`\nseed pipeline (raw file in the bucket -> query-ready, sextant bench --import):`);
  console.log(`  import job ${f(m.job_s)} s (${f(m.rows_per_s, 0)} rows/s, ${f(m.mb_per_s, 1)} MB/s, ` +
              `${m.segments} segments) + merge ${f(m.merge_s)} s + build ${f(I.build_s)} s = ` +
              `${f(m.query_ready_s)} s (insert path over S3 storage: ${f(S.load_s)} s)`);
}
console.log("\nquery QPS (1 thread)  recall@" + L.k);
console.log("setting              local QPS    s3 QPS   s3/local   recall local / s3");
const n = Math.min(L.runs.length, S.runs.length);
for (let i = 0; i < n; i++) {
  const a = L.runs[i], b = S.runs[i];
  const p = Object.entries(a.search_params || {}).map(([k, v]) => `${k}=${v}`).join(",") || "-";
  const c = I && I.runs[i];
  console.log(`${p.padEnd(18)} ${f(a.qps, 1).padStart(11)} ${f(b.qps, 1).padStart(9)} ` +
              `${ratio(b.qps, a.qps).padStart(10)}   ${f(a.recall, 4)} / ${f(b.recall, 4)}` +
              (c ? `   import run: ${f(c.qps, 1)} QPS, recall ${f(c.recall, 4)}` : ""));
}
console.log("\nI/O profile (ops / bytes / IOPS per phase; the full histograms are in the .txt and .json)");
console.log("phase     run    backend   reads        read bytes   read IOPS   writes      write bytes  write IOPS");
for (const ph of ["insert", "optimize", "query", "other"]) {
  for (const [run, J] of [["local", L], ["s3", S]].concat(I ? [["import", I]] : [])) {
    for (const be of ["local", "s3"]) {
      const c = J.io_profile && J.io_profile[ph] && J.io_profile[ph][be];
      if (!c || (c.read_ops === 0 && c.write_ops === 0)) continue;
      console.log(`${ph.padEnd(9)} ${run.padEnd(6)} ${be.padEnd(7)} ${String(c.read_ops).padStart(9)} ` +
                  `${hb(c.read_bytes).padStart(15)} ${f(c.read_iops, 1).padStart(11)} ` +
                  `${String(c.write_ops).padStart(8)} ${hb(c.write_bytes).padStart(16)} ${f(c.write_iops, 1).padStart(11)}`);
    }
  }
}
EOF
echo "results in $out"
