#!/usr/bin/env bash
# A tour of the cuckoo command-line tool: what `make demo` runs after building.
#
# Builds a filter of 1M keys, looks keys up, measures the false-positive rate over 1M
# keys that were never added, deletes keys, and shows a damaged file being refused. Works
# in a temporary directory, removed at the end; takes a few seconds.
#
# Usage: scripts/demo.sh [BUILD_DIR]   (default: build; the tool is BUILD_DIR/cuckoo)
set -euo pipefail

build_dir=${1:-build}
cuckoo=$(cd "$build_dir" 2>/dev/null && pwd)/cuckoo
if [[ ! -x $cuckoo ]]; then
    echo "demo: $build_dir/cuckoo was not built (CF_BUILD_CLI=OFF?); run make first" >&2
    exit 1
fi

# Keys present in the filter, and as many keys that are not.
keys=1000000
# Keys deleted in the last part.
deleted=100000

work=$(mktemp -d "${TMPDIR:-/tmp}/cuckoo-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

heading() { printf '\n== %s\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }

# cuckoo is called by its full path, but shown as the user would type it.
cuckoo() { "$cuckoo" "$@"; }

heading "A key file: $keys lines, user-1 to user-$keys"
seq -f 'user-%.0f' 1 "$keys" >keys.txt
show head -3 keys.txt
printf '%s bytes\n' "$(wc -c <keys.txt)"

heading "Build a filter sized to the keys (12-bit fingerprints by default)"
show cuckoo build users.cf keys.txt --progress

heading "What is in it"
show cuckoo info users.cf

heading "Query: added keys are always found; others almost never"
show cuckoo query users.cf user-1 user-500000 user-$keys nobody-1 nobody-2
missed=$(cuckoo query users.cf --absent <keys.txt | wc -l)
echo "Of the $keys added keys, $missed answered no (no false negatives: always 0)."
echo "In a pipeline, print only the keys that are certainly absent:"
printf '$ printf '\''%%s\\n'\'' user-7 stranger user-42 intruder | cuckoo query users.cf --absent\n'
printf '%s\n' user-7 stranger user-42 intruder | cuckoo query users.cf --absent

heading "False-positive rate over $keys keys that were never added"
seq -f 'absent-%.0f' 1 "$keys" >absent.txt
yes_answers=$(cuckoo query users.cf --present <absent.txt | wc -l)
expected=$(cuckoo info users.cf --json | awk -F': ' '/"fpr":/ { sub(/,$/, "", $2); print $2 }')
awk -v yes="$yes_answers" -v n="$keys" -v e="$expected" 'BEGIN {
    printf "measured  %.4f%%  (%d of %d answered yes)\n", 100 * yes / n, yes, n
    printf "expected  %.4f%%  (cuckoo info: fpr at the current load)\n", 100 * e
}'

heading "Delete $deleted keys, then look again"
printf '$ head -n %s keys.txt | cuckoo delete users.cf\n' "$deleted"
head -n "$deleted" keys.txt | cuckoo delete users.cf
show cuckoo info users.cf
echo "(user-1 was among the keys deleted; user-$keys was not)"
show cuckoo query users.cf user-1 user-$keys
missed=$(tail -n +"$((deleted + 1))" keys.txt | cuckoo query users.cf --absent | wc -l)
echo "Of the $((keys - deleted)) keys left, $missed answered no (no false negatives: always 0)."

heading "A damaged copy is refused, with the reason"
cp users.cf damaged.cf
size=$(wc -c <damaged.cf)
offset=$((size / 2))
byte=$(od -An -tu1 -j "$offset" -N1 damaged.cf | tr -d ' ')
# Flip every bit of the byte in the middle of the file (inside the tables).
printf '%b' "\\0$(printf '%03o' $((byte ^ 0xff)))" |
    dd of=damaged.cf bs=1 seek="$offset" conv=notrunc status=none
printf 'flipped the byte at offset %s of %s\n' "$offset" "$size"
# These fail on purpose: show their message and exit status, and carry on.
status=0
show cuckoo verify damaged.cf || status=$?
echo "(exit status $status)"
status=0
show cuckoo query damaged.cf user-1 || status=$?
echo "(exit status $status)"
show cuckoo verify users.cf

heading "Read more"
echo "man -l docs/cuckoo.1    every command, option and exit status, with examples"
echo "                        (man cuckoo once installed with make install)"
echo "cuckoo COMMAND --help   a summary of one command"
echo "README.md               the library, its figures, and how to use it from C"
