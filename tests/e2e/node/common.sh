# tests/e2e/node/common.sh: the checks the Node test scripts (run.sh, run_report_browser.sh) share,
# sourced after they set $here. Each need_* ends the script as skipped (exit 77, with the reason)
# or failed (exit 1) when what it names is missing.

# need_node MAJOR WHY: node on the PATH, version >= MAJOR (WHY: what needs it).
need_node() {
    if ! command -v node >/dev/null 2>&1; then
        echo "node not found: skipped"
        exit 77
    fi
    local major
    major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
    if [ "${major:-0}" -lt "$1" ]; then
        echo "node $(node --version) is older than $1 ($2): skipped"
        exit 77
    fi
}

# need_module PATH NAME: $here/node_modules/PATH exists (installed by `npm ci` here).
need_module() {
    if [ ! -e "$here/node_modules/$1" ]; then
        echo "$here/node_modules/$2 missing (run: cd tests/e2e/node && npm ci): skipped"
        exit 77
    fi
}

# need_sextant: $bin = $SX_SEXTANT_BIN, which ctest sets to the sextant binary.
need_sextant() {
    bin="${SX_SEXTANT_BIN:-}"
    if [ -z "$bin" ] || [ ! -x "$bin" ]; then
        echo "SX_SEXTANT_BIN is not set to the sextant binary" >&2
        exit 1
    fi
}

# make_tmp NAME: $tmp = a fresh directory NAME.XXXXXX under $SX_TMPDIR (or $TMPDIR, /tmp).
make_tmp() {
    local base="${SX_TMPDIR:-${TMPDIR:-/tmp}}"
    mkdir -p "$base"
    tmp="$(mktemp -d "$base/$1.XXXXXX")"
}
