#!/usr/bin/env bash
# Exact instructions per operation (valgrind's callgrind; this VM has no hardware counters,
# and its times drift by 30 %): runs cf-bench-icount (bench/icount.c) under callgrind once
# per shape and divides each op_<name> function's inclusive instruction count by the
# number of operations it did (the calling loop's few instructions included).
# Deterministic: the same library gives the same figures, so a change to a hot path is
# judged by the difference.
#
# Usage: bench/icount.sh [BINARY [SHAPE...]]   (default build/cf-bench-icount and the fast
#        shapes 12/4 8/4 16/4 12/2 8/2 16/2 8/8 and the semi-sorted 13/4s 9/4s; `make bench-icount`;
#        a shape's suffixes: s semi-sorted, c concurrent, g growing, x segmented, h CF_FAST_HASH)
# CUCKOOFILTER_CPU=baseline in the environment measures the baseline code.
set -euo pipefail
bin=${1:-build/cf-bench-icount}
shift || true
shapes=("$@")
[[ ${#shapes[@]} -gt 0 ]] || shapes=(12/4 8/4 16/4 12/2 8/2 16/2 8/8 13/4s 9/4s)
command -v valgrind >/dev/null || { echo "icount: valgrind is not installed" >&2; exit 1; }
[[ -x $bin ]] || { echo "icount: $bin was not built (make)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/cf-icount.XXXXXX")
trap 'rm -rf "$work"' EXIT
for shape in "${shapes[@]}"; do
    tag=${shape/\//_}
    valgrind --tool=callgrind --callgrind-out-file="$work/out.$tag" "$bin" "$shape" \
        >"$work/counts.$tag" 2>"$work/log.$tag" || { cat "$work/log.$tag" >&2; exit 1; }
    callgrind_annotate --inclusive=yes --threshold=100 "$work/out.$tag" >"$work/annotated.$tag"
    while read -r name count; do
        ir=$(grep -E "[:( ]op_${name}[ ']" "$work/annotated.$tag" | head -n 1 |
            awk '{gsub(",", "", $1); print $1}')
        [[ -n $ir ]] || { echo "icount: no count for op_$name ($shape)" >&2; exit 1; }
        awk -v n="$name" -v ir="$ir" -v c="$count" 'BEGIN { printf "%s %.1f\n", n, ir / c }'
    done <"$work/counts.$tag" >"$work/result.$tag"
done
printf 'instructions per operation (f/b; %s code)\n' "${CUCKOOFILTER_CPU:-auto-selected}"
printf '%-24s' operation
for shape in "${shapes[@]}"; do printf ' %9s' "$shape"; done
printf '\n'
first=${shapes[0]/\//_}
while read -r name _; do
    printf '%-24s' "$name"
    for shape in "${shapes[@]}"; do
        printf ' %9s' "$(awk -v n="$name" '$1 == n { print $2 }' "$work/result.${shape/\//_}")"
    done
    printf '\n'
done <"$work/result.$first"
