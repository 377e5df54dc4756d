#!/usr/bin/env bash
# tests/pkgconfig/run.sh BUILD_DIR: the README's "Linking" line, tested (ctest pkgconfig_link).
#   1. shared: cc app.c $(pkg-config --cflags --libs sextant), PKG_CONFIG_PATH=BUILD_DIR (which
#      selects sextant-uninstalled.pc); runs it; it needs libsextant.so and no CUDA library;
#   2. static: the same program with $(pkg-config --cflags --libs --static sextant) and a
#      directory holding only libsextant.a first on the library path (so -lsextant is the
#      archive): links without the CUDA runtime, needs no libsextant.so, runs;
#   3. server: server_app.c with $(pkg-config --cflags --libs sextant_server): starts the REST
#      server on an ephemeral port, stops it;
#   4. install: cmake --install into a scratch prefix, then steps 1 and 3 against it
#      (pkg-config --define-prefix: the prefix is where the .pc file lies).
# CC (default cc) compiles; SX_PC_TEST_CFLAGS adds a sanitizer build's flags. Exit 0 when all
# pass, 1 otherwise, 77 when pkg-config is missing.
set -uo pipefail
B=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-cc}
EXTRA=${SX_PC_TEST_CFLAGS:-}
command -v pkg-config >/dev/null 2>&1 || { echo "pkg-config not found: skipped"; exit 77; }
T=$(mktemp -d "${SX_TMPDIR:-${TMPDIR:-/tmp}}/pkgconfig.XXXXXX" 2>/dev/null || mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
cuda_needed() { readelf -d "$1" | grep NEEDED | grep -E '\[lib(cuda|cudart|cublas|cublasLt)\.' || true; }

# shellcheck disable=SC2086  # pkg-config output is a list of flags
build_run() { # NAME PKG_CONFIG_ARGS... ; compiles app.c into $T/NAME and runs it
    local name=$1
    shift
    local flags
    if ! flags=$(pkg-config "$@"); then
        bad "$name: pkg-config $* failed"
        return 1
    fi
    echo "     $CC app.c $LPRE $flags"
    if ! $CC -std=c17 -Wall -Werror $EXTRA -o "$T/$name" "$SRC/app.c" $LPRE $flags 2>"$T/$name.log"; then
        cat "$T/$name.log"
        bad "$name: does not compile/link"
        return 1
    fi
    rm -rf "$T/db-$name"
    if ! LD_LIBRARY_PATH="$LIBDIR" "$T/$name" "$T/db-$name"; then
        bad "$name: the program failed"
        return 1
    fi
    return 0
}

server_run() { # NAME PKG_CONFIG_ARGS...
    local name=$1
    shift
    local flags
    flags=$(pkg-config "$@") || { bad "$name: pkg-config $* failed"; return 1; }
    echo "     $CC server_app.c $flags"
    if ! $CC -std=c17 -Wall -Werror $EXTRA -o "$T/$name" "$SRC/server_app.c" $flags 2>"$T/$name.log"; then
        cat "$T/$name.log"
        bad "$name: does not compile/link"
        return 1
    fi
    rm -rf "$T/db-$name"
    mkdir -p "$T/db-$name"
    if "$T/$name" "$T/db-$name"; then ok "$name"; else bad "$name: the program failed"; fi
}

# ---------------------------------------------------------------- 1-3. build tree
export PKG_CONFIG_PATH="$B"
unset PKG_CONFIG_DISABLE_UNINSTALLED
LIBDIR=$(pkg-config --variable=libdir sextant)
if [ "$LIBDIR" != "$B" ]; then
    bad "PKG_CONFIG_PATH=$B did not select sextant-uninstalled.pc (libdir $LIBDIR)"
fi
LPRE=""
if build_run shared --cflags --libs sextant; then
    if ! readelf -d "$T/shared" | grep -q 'NEEDED.*\[libsextant\.so\]'; then
        bad "shared: the program does not need libsextant.so"
    elif [ -n "$(cuda_needed "$T/shared")" ]; then
        bad "shared: the program needs a CUDA library: $(cuda_needed "$T/shared")"
    else
        ok "shared (libsextant.so from the build tree)"
    fi
fi
mkdir -p "$T/static-lib"
cp "$B/libsextant.a" "$T/static-lib/"
LPRE="-L$T/static-lib"
if build_run static --cflags --libs --static sextant; then
    if readelf -d "$T/static" | grep -q 'NEEDED.*libsextant'; then
        bad "static: the program still needs libsextant.so"
    elif [ -n "$(cuda_needed "$T/static")" ]; then
        bad "static: the program needs a CUDA library: $(cuda_needed "$T/static")"
    else
        ok "static (libsextant.a, no CUDA runtime)"
    fi
fi
LPRE=""
server_run server --cflags --libs sextant_server

# ---------------------------------------------------------------- 4. install
if ! cmake --install "$B" --prefix "$T/inst" >"$T/install.log" 2>&1; then
    tail -n 20 "$T/install.log"
    bad "cmake --install"
else
    pcdir=$(dirname "$(find "$T/inst" -name sextant.pc | head -n 1)")
    export PKG_CONFIG_PATH="$pcdir"
    LIBDIR=$(pkg-config --define-prefix --variable=libdir sextant)
    for f in "$T/inst/include/sextant.h" "$LIBDIR/libsextant.a" "$LIBDIR/libsextant.so" \
        "$LIBDIR/libsextant_server.a" "$T/inst/bin/sextant"; do
        [ -e "$f" ] || bad "install: $f missing"
    done
    if [ -f "$B/libsextant_cuda.so" ] && [ ! -f "$LIBDIR/libsextant_cuda.so" ]; then
        bad "install: the CUDA plugin is missing from $LIBDIR"
    fi
    if build_run installed --define-prefix --cflags --libs sextant; then
        ok "installed (prefix $T/inst, $pcdir/sextant.pc)"
    fi
    server_run installed-server --define-prefix --cflags --libs sextant_server
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
