#!/usr/bin/env bash
# check_tidy.sh [-j JOBS] BUILD_DIR: clang-tidy with the repo's .clang-tidy on every .c file under
# src/ and tools/, against BUILD_DIR/compile_commands.json (`make lint`: the release build, whose
# flags the analyzer sees). Issue 12; style.md "Formatting". JOBS files at a time (default: the
# number of CPUs). Prints every finding and one summary line (files, findings, seconds).
# Every check is an error (WarningsAsErrors: '*'): exit 0 with no finding, 1 with any (or a file
# clang-tidy could not process, or one missing from the compile database), 2 on a usage error or
# a missing clang-tidy / compile database.
# One clang-tidy process per file, never several files in one: clang-tidy 14 keeps the va_list
# checker's state from one file to the next (LLVM bug 41311) and then reports every vsnprintf of a
# later file as called with an uninitialised va_list.
# CLANG_TIDY overrides the binary; clang-tidy-14 (Debian 12's, which CI runs) is preferred.
set -euo pipefail
usage() {
    echo "usage: $0 [-j JOBS] BUILD_DIR" >&2
    exit 2
}
jobs=$(nproc 2>/dev/null || echo 2)
while getopts j: opt; do
    case $opt in
    j) jobs=$OPTARG ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || usage
case $jobs in '' | *[!0-9]* | 0) usage ;; esac
build=$(cd "$1" 2>/dev/null && pwd) || {
    echo "check_tidy: no build directory $1 (configure it first: make)"
    exit 2
}
src=$(cd "$(dirname "$0")/../.." && pwd)
db=$build/compile_commands.json
if [ ! -f "$db" ]; then
    echo "check_tidy: no $db (CMAKE_EXPORT_COMPILE_COMMANDS; configure with make)"
    exit 2
fi
ct=${CLANG_TIDY:-$(command -v clang-tidy-14 || command -v clang-tidy || true)}
if [ -z "$ct" ] || ! command -v "$ct" >/dev/null 2>&1; then
    echo "check_tidy: clang-tidy not found (tools/deps.sh installs Debian's clang-tidy)"
    exit 2
fi
cd "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files -- 'src/*.c' 'tools/*.c' || true)
else
    mapfile -t files < <(find src tools -type f -name '*.c' | sort || true)
fi
if [ ${#files[@]} -eq 0 ]; then
    echo "check_tidy: no .c files under src/ and tools/"
    exit 1
fi
missing=()
checked=()
for f in "${files[@]}"; do
    if grep -qF "\"file\": \"$src/$f\"" "$db"; then
        checked+=("$f")
    else
        missing+=("$f")
    fi
done
files=("${checked[@]}")

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
t0=$(date +%s)
# Per file: its output in $out/N.log and clang-tidy's exit status in $out/N.rc.
for i in "${!files[@]}"; do
    printf '%s\t%s\n' "$i" "${files[$i]}"
done | xargs -P "$jobs" -L 1 sh -c '
    "$0" -p "$1" --quiet --extra-arg=-Wno-unknown-warning-option "$4" >"$2/$3.log" 2>&1
    echo $? >"$2/$3.rc"' "$ct" "$build" "$out"
t1=$(date +%s)

findings=0
failed_files=0
for i in "${!files[@]}"; do
    log=$out/$i.log
    rc=$(cat "$out/$i.rc" 2>/dev/null || echo 255)
    n=$(grep -cE '^[^ ].*:[0-9]+:[0-9]+: (warning|error): ' "$log" || true)
    if [ "$rc" -ne 0 ] || [ "$n" -gt 0 ]; then
        failed_files=$((failed_files + 1))
        findings=$((findings + (n > 0 ? n : 1)))
        echo "== ${files[$i]} (clang-tidy exit $rc)"
        grep -vE '^[0-9]+ warnings? generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^$' \
            "$log" || true
    fi
done
for f in "${missing[@]}"; do
    echo "== $f: not in $db (not built in this configuration): cannot be checked"
done
version=$("$ct" --version | sed -n 's/.*version \([0-9.]*\).*/\1/p' | head -n 1)
summary="tidy: ${#files[@]} files checked with clang-tidy $version in $((t1 - t0)) s ($jobs at a time)"
if [ "$findings" -gt 0 ] || [ ${#missing[@]} -gt 0 ]; then
    plural=s
    [ "$findings" -eq 1 ] && plural=
    echo "$summary: $findings finding$plural in $failed_files of them${missing:+, ${#missing[@]} more not in the compile database}"
    exit 1
fi
echo "$summary: 0 findings"
