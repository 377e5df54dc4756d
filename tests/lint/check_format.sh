#!/usr/bin/env bash
# check_format.sh [SRC_DIR]: every tracked *.c / *.h file is formatted as the repo's .clang-format
# says (issue 12; style.md "Formatting"), checked with `clang-format --dry-run -Werror`. Prints the
# files that are not, with the command that fixes them, and one summary line.
# SRC_DIR: the checkout (default: this script's). Files are `git ls-files '*.c' '*.h'` there, or
# every *.c / *.h under it outside build*/ when it is not a git checkout.
# CLANG_FORMAT overrides the binary; clang-format-14 (Debian 12's, which CI runs) is preferred,
# since other versions format some constructs differently.
# Exit 0 when all are formatted, 1 otherwise, 2 when clang-format is missing.
set -euo pipefail
src=${1:-"$(dirname "$0")/../.."}
cd "$src"
cf=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [ -z "$cf" ] || ! command -v "$cf" >/dev/null 2>&1; then
    echo "check_format: clang-format not found (tools/deps.sh installs Debian's clang-format)"
    exit 2
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files -- '*.c' '*.h' || true)
else
    mapfile -t files < <(find . -path './build*' -prune -o -type f -name '*.[ch]' -print |
        sed 's|^\./||' | sort || true)
fi
if [ ${#files[@]} -eq 0 ]; then
    echo "check_format: no *.c / *.h files found in $src"
    exit 1
fi
# One run over all files; each unformatted spot is "FILE:LINE:COL: error: code should be
# clang-formatted".
out=$("$cf" --dry-run -Werror "${files[@]}" 2>&1) && rc=0 || rc=$?
mapfile -t bad < <(printf '%s\n' "$out" | sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: .*/\1/p' | sort -u)
version=$("$cf" --version | sed -n 's/.*version \([0-9.]*\).*/\1/p')
if [ "$rc" -ne 0 ] || [ ${#bad[@]} -gt 0 ]; then
    if [ ${#bad[@]} -eq 0 ]; then # clang-format failed without naming a file
        printf '%s\n' "$out"
        echo "format: clang-format $version failed (exit $rc)"
        exit 1
    fi
    echo "not formatted as .clang-format says (clang-format $version):"
    for f in "${bad[@]}"; do
        echo "  $f"
    done
    echo "fix: clang-format -i FILE (the repo's .clang-format is picked up), e.g."
    echo "  $(basename "$cf") -i ${bad[*]}"
    echo "format: ${#bad[@]} of ${#files[@]} files not formatted"
    exit 1
fi
echo "format: ${#files[@]} files checked with clang-format $version, all formatted"
