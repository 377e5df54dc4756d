#!/usr/bin/env bash
# Every global symbol defined in libsextant.a (and libsextant_server.a) must start with sx_
# (style.md: public sx_, internal sx__).
set -euo pipefail
total=0
for lib in "$@"; do
    # (sanitizer builds add __odr_asan.<name> aliases: those are the compiler's, not ours)
    bad=$(nm -g --defined-only "$lib" | awk 'NF==3 {print $3}' | grep -v -e '^sx_' -e '^__odr_asan\.sx_' || true)
    if [ -n "$bad" ]; then
        echo "symbols without the sx_ prefix in $lib:"
        echo "$bad"
        echo "0 passed, 1 failed"
        exit 1
    fi
    total=$((total + $(nm -g --defined-only "$lib" | awk 'NF==3' | wc -l)))
done
echo "symbol prefix: $total global symbols in $# libraries, all sx_"
echo "1 passed, 0 failed"
