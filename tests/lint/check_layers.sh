#!/usr/bin/env bash
# check_layers.sh: the layer rules the link checks cannot see (style.md "Layout"; the link checks
# themselves are the sx_layercheck_* targets in CMakeLists.txt).
#
#   check_layers.sh includes SRC_DIR
#       every #include "DIR/..." in SRC_DIR/LAYER/ names LAYER itself or a layer below it:
#         util < platform < vector < gpu < index;  storage: util platform;
#         engine: everything below;  server: util platform (the engine through <sextant.h>);
#         cluster: util platform server (built into libsextant_server.a).
#       A header included upwards would compile (one include root, src/) and, for a type or an
#       inline function, link: so it is checked on the text.
#   check_layers.sh handlers LIBSEXTANT_SERVER.a
#       no handlers_*.o references a symbol that another handlers_*.o defines (the handlers
#       share request.c, json.c, catalog.c, ... and never call each other).
#   check_layers.sh all SRC_DIR LIBSEXTANT_SERVER.a     both (the ctest lint_layers)
#
# Exit 0 when the rules hold, 1 with one line per violation otherwise.
set -euo pipefail

allowed() {
    case $1 in
    util) echo "util" ;;
    platform) echo "util platform" ;;
    vector) echo "util platform vector" ;;
    gpu) echo "util platform vector gpu" ;;
    index) echo "util platform vector gpu index" ;;
    storage) echo "util platform storage" ;;
    engine) echo "util platform vector gpu index storage engine" ;;
    server) echo "util platform server" ;;
    cluster) echo "util platform server cluster" ;;
    *) echo "" ;;
    esac
}

check_includes() {
    local src=$1 bad=0 n=0 layer f line dir
    for layer in util platform vector gpu index storage engine server cluster; do
        [ -d "$src/$layer" ] || continue
        local ok
        ok=" $(allowed "$layer") "
        while IFS= read -r f; do
            while IFS= read -r line; do
                n=$((n + 1))
                dir=$(printf '%s\n' "$line" | sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)\/.*/\1/p')
                [ -z "$dir" ] && continue
                [ -d "$src/$dir" ] || continue
                case $ok in
                *" $dir "*) ;;
                *)
                    echo "FAIL ${f#"$src"/}: includes $dir/ (layer $layer may include: $(allowed "$layer"))"
                    bad=$((bad + 1))
                    ;;
                esac
            done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
        done < <(find "$src/$layer" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
    done
    if [ "$bad" -ne 0 ]; then
        echo "layer includes: $bad upward include(s)"
        return 1
    fi
    echo "layer includes: $n includes under $src, none upwards"
}

check_handlers() {
    local lib=$1 tmp
    tmp=$(mktemp)
    # member defined-symbol pairs, member undefined-symbol pairs (handlers_*.o only)
    nm -A --defined-only "$lib" | awk -F: '$2 ~ /^handlers_.*\.o$/ { split($3, a, " ");
        if (a[2] ~ /^[A-Z]$/ && a[2] != "U") print $2, a[3] }' | sort -u >"$tmp.def"
    nm -A -u "$lib" | awk -F: '$2 ~ /^handlers_.*\.o$/ { split($3, a, " "); print $2, a[2] }' |
        sort -u >"$tmp.und"
    local bad
    bad=$(awk 'NR == FNR { def[$2] = $1; next } ($2 in def) && def[$2] != $1 {
        printf "FAIL %s uses %s, defined in %s\n", $1, $2, def[$2] }' "$tmp.def" "$tmp.und")
    rm -f "$tmp" "$tmp.def" "$tmp.und"
    if [ -n "$bad" ]; then
        echo "$bad"
        echo "handlers: a handler file calls another (share the code through request.c)"
        return 1
    fi
    echo "handlers: no handlers_*.o references a symbol of another handlers_*.o"
}

case ${1:-} in
includes) check_includes "$2" ;;
handlers) check_handlers "$2" ;;
all)
    rc=0
    check_includes "$2" || rc=1
    check_handlers "$3" || rc=1
    if [ "$rc" -eq 0 ]; then echo "2 passed, 0 failed"; else echo "some layer rule failed"; fi
    exit "$rc"
    ;;
*)
    echo "usage: $0 includes SRC_DIR | handlers LIB.a | all SRC_DIR LIB.a" >&2
    exit 2
    ;;
esac
