#!/usr/bin/env bash
# Throughput of `cuckoo query`: a filter built by the tool from N keys (`key:<12 digits>`),
# then queried with those N keys and N others that were never added (in one input, the
# present and absent keys interleaved), printing the present ones to /dev/null. Each
# query runs REPS times; the median, in keys per second, goes to stdout with the build
# and the query's own times. The input is in the page cache (read once beforehand), so
# the figure is the tool's, not the disk's.
#
# Usage: bench/cli_query.sh [CUCKOO [N [REPS [THREADS...]]]]   (default build/cuckoo,
#        10000000, 3, and the tool's default threads; `make bench-cli`). Give another
#        build's `cuckoo` to compare two versions on the same machine in the same session;
#        give thread counts (`1 2`) to time `query --threads` with each, in turn.
set -euo pipefail
export LC_ALL=C # byte order for sort and comm
cuckoo=${1:-build/cuckoo}
n=${2:-10000000}
reps=${3:-3}
threads=("${@:4}")
[[ ${#threads[@]} -gt 0 ]] || threads=(default)
[[ -x $cuckoo ]] || { echo "cli_query: $cuckoo was not built (make)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/cf-cli-query.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Even numbers are added, odd ones are not; the query input alternates them.
awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "key:%012d\n", 2 * i }' >"$work/added"
awk -v n="$n" 'BEGIN { for (i = 0; i < 2 * n; i++) printf "key:%012d\n", i }' >"$work/queries"
cat "$work/added" "$work/queries" >/dev/null

now() { date +%s.%N; }
t0=$(now)
"$cuckoo" build "$work/f.cf" "$work/added" --seed 1 -q
t1=$(now)
declare -A times # thread count -> the times of its runs
opts() { [[ $1 == default ]] || printf -- '--threads=%s' "$1"; }
for ((r = 0; r < reps; r++)); do
    for th in "${threads[@]}"; do
        s=$(now)
        # shellcheck disable=SC2046 # opts prints one word or none
        "$cuckoo" query "$work/f.cf" --present -q $(opts "$th") <"$work/queries" >"$work/present"
        e=$(now)
        times[$th]+="$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f", e - s }') "
        # No false negatives: every added key must be among those printed.
        missing=$(comm -23 "$work/added" <(sort "$work/present") | wc -l)
        [[ $missing -eq 0 ]] || { echo "cli_query: $missing added keys reported absent" >&2; exit 1; }
    done
done
found=$(wc -l <"$work/present")
echo "$cuckoo: build of $n keys $(awk -v s="$t0" -v e="$t1" 'BEGIN { printf "%.2f", e - s }') s;" \
    "query of $((2 * n)) keys (half present), $found printed present ($((found - n)) false positives):"
for th in "${threads[@]}"; do
    median=$(printf '%s\n' ${times[$th]} | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
    awk -v th="$th" -v n="$n" -v m="$median" -v all="${times[$th]% }" 'BEGIN {
        printf "  threads %s: %s s (median of: %s), %.2f M keys/s\n", th, m, all, 2 * n / m / 1e6
    }'
done
