#!/usr/bin/env bash
# check_needed.sh PLUGIN BINARY_OR_LIBRARY...: CPU users must not pay for CUDA (issue 12).
#   - no file given after PLUGIN lists a CUDA library (libcudart, libcublas, libcublasLt, libcuda,
#     libnvrtc, libcufft, libcurand, libcusolver, libcusparse, libnvJitLink, ...) in the NEEDED
#     entries of its dynamic section (readelf -d): the CUDA code lives in the plugin, which the
#     gpu layer opens with dlopen on first use (src/gpu/gpu_loader.c);
#   - PLUGIN ("-" in a build without CUDA) exists, is a shared object, and exports one symbol,
#     sx__gpu_plugin_init (every other symbol, the static CUDA runtime's included, is local).
# Exit 0 when all hold, 1 otherwise (each failure named).
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 PLUGIN|- FILE..." >&2
    exit 2
fi
plugin=$1
shift
cuda_re='^lib(cuda|cudart|cublas|cublasLt|nvrtc|nvJitLink|nvjitlink|cufft|curand|cusolver|cusparse|npp[a-z]*|nvToolsExt|cudnn)(\.|$)'
failed=0
checked=0
for f in "$@"; do
    if [ ! -f "$f" ]; then
        echo "FAIL $f: missing"
        failed=$((failed + 1))
        continue
    fi
    needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    bad=$(printf '%s\n' "$needed" | grep -E "$cuda_re" || true)
    if [ -n "$bad" ]; then
        echo "FAIL $f needs CUDA libraries: $(echo $bad)"
        failed=$((failed + 1))
    else
        echo "ok   $f: NEEDED $(echo $needed)"
    fi
    checked=$((checked + 1))
done
if [ "$plugin" != "-" ]; then
    checked=$((checked + 1))
    if [ ! -f "$plugin" ]; then
        echo "FAIL the CUDA plugin $plugin was not built"
        failed=$((failed + 1))
    else
        exports=$(nm -D --defined-only "$plugin" | awk 'NF == 3 && $2 ~ /[A-Z]/ {print $3}' | sort -u)
        if [ "$exports" != "sx__gpu_plugin_init" ]; then
            echo "FAIL $plugin exports more (or other) than sx__gpu_plugin_init: $(echo $exports | head -c 400)"
            failed=$((failed + 1))
        else
            echo "ok   $plugin: exports sx__gpu_plugin_init only; NEEDED" \
                "$(readelf -d "$plugin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
        fi
    fi
fi
echo "$((checked - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
