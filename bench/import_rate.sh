#!/usr/bin/env bash
# import_rate.sh: bulk import vs the insert path (issue 14; a benchmark, not a test). Runs the
# `rates` case of test_import_s3 at a chosen size: the same N x 128 float32 rows (.fvecs) are
# imported from a local file and from s3rver (ranged GETs through the S3 client), and inserted
# with sx_insert in batches of 10,000 + sx_flush (SX_SYNC_FULL), into fresh collections; each
# is checked (count, exact search hits) and its seconds, rows/s and MB/s are printed.
#
# Usage: bench/import_rate.sh [BUILD_DIR] [ROWS]      (default build, 400000 rows = 206 MB)
# Needs: node (s3rver) with `npm ci` done in tests/e2e/node (tools/deps.sh does it); SX_SOURCE_DIR
# points the test at a checkout that has it when this one does not. Memory: about 3 x the data
# (the test's copy, s3rver's object, the page cache).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build}"
rows="${2:-400000}"
case $build in /*) ;; *) build="$root/$build" ;; esac
if [ ! -x "$build/test_import_s3" ]; then
    cmake --build "$build" --target test_import_s3
fi
cd "$build"
SX_SOURCE_DIR="${SX_SOURCE_DIR:-$root}" SX_IMPORT_ROWS="$rows" ./test_import_s3 2>&1 |
    sed -n '/ x 128 /,/sx_insert/p'
