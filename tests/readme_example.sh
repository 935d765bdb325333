#!/usr/bin/env bash
# The README's C example must compile and run, so that it cannot rot.
#
# A line `<!-- ci: compile -->` in README.md marks the next ```c fenced block as a
# complete program. Each marked block is compiled against the built header and static
# library with -Wall -Wextra -Werror and run; it must exit 0. A README without any
# marker fails the test: the example is expected to be there.
#
# Usage: readme_example.sh README_MD INCLUDE_DIR LIBCUCKOOFILTER_A
# Environment: CC (default cc), CF_EXTRA_CFLAGS (e.g. the build's -fsanitize flags).
set -euo pipefail

die() { echo "readme_example: $*" >&2; exit 1; }

[[ $# -eq 3 ]] || die "usage: $0 README_MD INCLUDE_DIR LIBCUCKOOFILTER_A"
readme=$1
include_dir=$2
static_lib=$3
cc=${CC:-cc}
[[ -f $readme ]] || die "$readme does not exist (it needs a C example marked <!-- ci: compile -->)"
[[ -f $static_lib ]] || die "no such library: $static_lib"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cf-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Writes example1.c, example2.c, ... and prints "markers blocks unterminated".
counts=$(awk -v dir="$tmp" '
    /^[ \t]*<!--[ \t]*ci:[ \t]*compile[ \t]*-->[ \t]*$/ { markers++; armed = 1; next }
    inblock && /^[ \t]*```[ \t]*$/ { inblock = 0; close(file); next }
    inblock { print > file; next }
    armed && /^[ \t]*```[ \t]*c[ \t]*$/ {
        blocks++; armed = 0; inblock = 1
        file = sprintf("%s/example%d.c", dir, blocks)
        printf "" > file
        next
    }
    END { print markers + 0, blocks + 0, inblock + 0 }
' "$readme")
read -r markers blocks unterminated <<<"$counts"

[[ $markers -gt 0 ]] || die "$readme has no '<!-- ci: compile -->' line before its C example"
[[ $unterminated -eq 0 ]] || die "$readme: the last marked \`\`\`c block is never closed"
[[ $blocks -eq $markers ]] ||
    die "$readme: $markers '<!-- ci: compile -->' markers but only $blocks \`\`\`c blocks follow them"

for ((i = 1; i <= blocks; i++)); do
    src="$tmp/example$i.c"
    exe="$tmp/example$i"
    echo "== README example $i: $(wc -l <"$src") lines"
    # shellcheck disable=SC2086 # CF_EXTRA_CFLAGS is a list of flags
    "$cc" -Wall -Wextra -Werror ${CF_EXTRA_CFLAGS:-} -I"$include_dir" -o "$exe" "$src" \
        "$static_lib" -lm || die "README example $i does not compile (see above)"
    (cd "$tmp" && timeout 120 "$exe") || die "README example $i exited with status $?"
done
echo "readme_example: $blocks example(s) compiled and ran"
