#!/usr/bin/env bash
# Exact instructions per operation (valgrind's callgrind; this VM has no hardware counters,
# and its times drift by 30 %): runs cf-bench-icount (bench/icount.c) under callgrind and
# divides each op_<name> function's inclusive instruction count by the number of
# operations it did. Deterministic: the same library gives the same figures, so a change
# to a hot path is judged by the difference.
#
# Usage: bench/icount.sh [BINARY]   (default build/cf-bench-icount; `make bench-icount`)
set -euo pipefail
bin=${1:-build/cf-bench-icount}
command -v valgrind >/dev/null || { echo "icount: valgrind is not installed" >&2; exit 1; }
[[ -x $bin ]] || { echo "icount: $bin was not built (make)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/cf-icount.XXXXXX")
trap 'rm -rf "$work"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$work/out" "$bin" >"$work/counts" 2>"$work/log" ||
    { cat "$work/log" >&2; exit 1; }
callgrind_annotate --inclusive=yes --threshold=100 "$work/out" >"$work/annotated"
printf '%-24s %12s\n' operation "instr/op"
while read -r name count; do
    ir=$(grep -E "[:( ]op_${name}[ ']" "$work/annotated" | head -n 1 | awk '{gsub(",", "", $1); print $1}')
    [[ -n $ir ]] || { echo "icount: no count for op_$name" >&2; exit 1; }
    awk -v n="$name" -v ir="$ir" -v c="$count" 'BEGIN { printf "%-24s %12.1f\n", n, ir / c }'
done <"$work/counts"
