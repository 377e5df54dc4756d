#!/usr/bin/env bash
# tests/e2e/node/run_report_browser.sh: ctest `report_browser_e2e`. Writes the HTML benchmark
# report of tests/e2e/data/bench/fmnist_demo.json with "$SX_SEXTANT_BIN" bench report, then opens
# it in Debian's Chromium through playwright-core (report_browser.js: layout checks at 1400 x
# 1000). Exit 77 (skipped) when node (>= 20, what playwright-core needs), playwright-core
# (node_modules, installed by `npm ci` in this directory; .ci/run does it) or /usr/bin/chromium
# (Debian's chromium; tools/deps.sh installs it) is missing. The report and the browser's
# screenshot (report.png) stay in $SX_TMPDIR/report_browser.* when a check fails.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
chromium="${SX_CHROMIUM:-/usr/bin/chromium}"

if ! command -v node >/dev/null 2>&1; then
    echo "node not found: skipped"
    exit 77
fi
major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
if [ "${major:-0}" -lt 20 ]; then
    echo "node $(node --version) is older than 20 (playwright-core needs 20): skipped"
    exit 77
fi
if [ ! -f "$here/node_modules/playwright-core/package.json" ]; then
    echo "$here/node_modules/playwright-core missing (run: cd tests/e2e/node && npm ci): skipped"
    exit 77
fi
if [ ! -x "$chromium" ]; then
    echo "$chromium not found (apt-get install chromium): skipped"
    exit 77
fi
bin="${SX_SEXTANT_BIN:-}"
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
    echo "SX_SEXTANT_BIN is not set to the sextant binary" >&2
    exit 1
fi

base="${SX_TMPDIR:-${TMPDIR:-/tmp}}"
mkdir -p "$base"
tmp="$(mktemp -d "$base/report_browser.XXXXXX")"
report="$tmp/report.html"
if ! "$bin" bench report "$root/tests/e2e/data/bench/fmnist_demo.json" -o "$report"; then
    echo "sextant bench report failed" >&2
    exit 1
fi
cd "$here"
SX_CHROMIUM="$chromium" timeout 300 node report_browser.js "$report"
rc=$?
if [ "$rc" = 0 ]; then
    rm -rf "$tmp"
else
    echo "report and screenshot kept in $tmp" >&2
fi
exit "$rc"
