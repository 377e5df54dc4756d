#!/usr/bin/env bash
# tests/e2e/node/run_webui_browser.sh [chromium|firefox]: ctest `webui_browser_e2e` (chromium, the
# default) and `webui_firefox_e2e` (firefox). Starts "$SX_SEXTANT_BIN" serve on a fresh data
# directory and a free loopback port with a users file (root:Milvus read-write, viewer:viewpass
# read-only), and runs against it
#   chromium  webui_browser.js: every page of the web console (/webui/) in Debian's Chromium
#             through playwright-core;
#   firefox   webui_firefox.js: the console's main paths in Debian's Firefox ESR over WebDriver
#             BiDi (the `ws` package).
# Then stops the server with SIGTERM and requires exit status 0 (a graceful stop). Screenshots go
# to $SX_SCREENSHOT_DIR (default: <build dir>/webui-screens, the build dir being $SX_BUILD_DIR or
# the directory of the sextant binary). Exit 77 (skipped) when node (>= 20), the Node package
# (node_modules, installed by `npm ci` in this directory; .ci/run does it) or the browser
# (/usr/bin/chromium, /usr/bin/firefox-esr: tools/deps.sh installs them) is missing. The test
# gets the server's data directory in $SX_DATA_DIR (webui_browser.js puts a bench result in its
# bench/, as `sextant bench --json DATA_DIR/bench/NAME.json` would). The server's data and log
# stay in $SX_TMPDIR/webui_*.XXXXXX when a check fails.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
engine="${1:-chromium}"
. "$here/common.sh"

need_node 20 "playwright-core needs 20"
case $engine in
chromium)
    browser="${SX_CHROMIUM:-/usr/bin/chromium}"
    need_module playwright-core/package.json playwright-core
    ;;
firefox)
    browser="${SX_FIREFOX:-/usr/bin/firefox-esr}"
    need_module ws/package.json ws
    ;;
*)
    echo "usage: run_webui_browser.sh [chromium|firefox]" >&2
    exit 2
    ;;
esac
if [ ! -x "$browser" ]; then
    echo "$browser not found (tools/deps.sh installs it): skipped"
    exit 77
fi
need_sextant
make_tmp "webui_$engine"
shots="${SX_SCREENSHOT_DIR:-${SX_BUILD_DIR:-$(cd "$(dirname "$bin")" && pwd)}/webui-screens}"
mkdir -p "$shots"
printf 'root:Milvus\nviewer:viewpass:ro\n' >"$tmp/users"

pid=""
keep=0
cleanup() {
    kill_sextant
    if [ "$keep" = 0 ]; then
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT

# One build thread: the 60,000-row build the Chromium test watches then lasts seconds on any
# machine (all cores of a large one could finish it between two of the page's 1 s polls).
start_sextant --users "$tmp/users" --build-threads 1 || exit 1
# the server's data directory (start_sextant made it): the tests may put files the server reads there
export SX_DATA_DIR="$tmp/data"

cd "$here"
if [ "$engine" = chromium ]; then
    SX_CHROMIUM="$browser" SX_WEBUI_URL="http://127.0.0.1:$port" SX_SCREENSHOT_DIR="$shots" \
        timeout 400 node webui_browser.js
else
    SX_FIREFOX="$browser" SX_URL="http://127.0.0.1:$port" SX_USER=root SX_PASS=Milvus \
        SX_SCREENSHOT_DIR="$shots" timeout 300 node webui_firefox.js
fi
rc=$?

if ! stop_sextant; then
    [ "$rc" = 0 ] && rc=1
fi
if [ "$rc" != 0 ]; then
    keep=1
    echo "server data and log kept in $tmp" >&2
fi
exit "$rc"
