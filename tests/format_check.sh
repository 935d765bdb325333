#!/usr/bin/env bash
# Every C source of the project is formatted by clang-format with the project's
# .clang-format; prints the offending lines and fails otherwise. With --fix (what
# `make format` runs), formats the same files in place instead.
#
# Files: those git tracks plus new ones it does not ignore (so a file is checked before
# its first commit); outside a git checkout, every *.c, *.h and *.cpp not under build*/.
#
# Usage: format_check.sh [--fix] [SOURCE_DIR]   Environment: CLANG_FORMAT (default clang-format)
set -euo pipefail

die() { echo "format_check: $*" >&2; exit 1; }

fix=false
if [[ ${1:-} == --fix ]]; then
    fix=true
    shift
fi
root=${1:-$(dirname "$0")/..}
cd "$root" || die "no such directory: $root"
clang_format=${CLANG_FORMAT:-clang-format}
command -v "$clang_format" >/dev/null || die "$clang_format not found: run scripts/install-deps"

files=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    while IFS= read -r -d '' f; do
        [[ -f $f ]] && files+=("$f")
    done < <(git ls-files -z --cached --others --exclude-standard -- '*.c' '*.h' '*.cpp')
else
    while IFS= read -r -d '' f; do
        files+=("$f")
    done < <(find . \( -path './build*' -o -path './.git' \) -prune -o \
                    -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) -print0)
fi
[[ ${#files[@]} -gt 0 ]] || die "no C sources found under $root"

if $fix; then
    "$clang_format" -i "${files[@]}"
    echo "format_check: formatted ${#files[@]} files"
    exit 0
fi

# One file at a time, so the message names each offender even when the tool stops early.
bad=()
for f in "${files[@]}"; do
    "$clang_format" --dry-run --Werror "$f" || bad+=("$f")
done
if [[ ${#bad[@]} -gt 0 ]]; then
    echo "format_check: ${#bad[@]} file(s) need clang-format (run: make format):" >&2
    printf '    %s\n' "${bad[@]}" >&2
    exit 1
fi
echo "format_check: ${#files[@]} files formatted"
