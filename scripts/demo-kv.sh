#!/usr/bin/env bash
# A tour of cuckoo-kv, the example key/value store (examples/logstore): what `make demo`
# runs after the cuckoo tool's tour. The original demo of the system it grew from: import
# a large text file, delete every other record, put them back, export, and compare. Then
# a kill -9 in the middle of an import, and the store opening afterwards. Works in a
# temporary directory, removed at the end; takes a few seconds.
#
# Usage: scripts/demo-kv.sh [BUILD_DIR]   (default: build; the tool is BUILD_DIR/cuckoo-kv)
set -euo pipefail

build_dir=${1:-build}
kv_tool=$(cd "$build_dir" 2>/dev/null && pwd)/cuckoo-kv
if [[ ! -x $kv_tool ]]; then
    echo "demo-kv: $build_dir/cuckoo-kv was not built (CF_BUILD_EXAMPLES=OFF?); run make first" >&2
    exit 1
fi

# Lines of the generated source file (about 30 MB).
lines=600000

work=$(mktemp -d "${TMPDIR:-/tmp}/cuckoo-kv-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

heading() { printf '\n== %s\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }
# cuckoo-kv is called by its full path, but shown as the user would type it.
cuckoo-kv() { "$kv_tool" "$@"; }

heading "A store: one directory, one append-only log; created on first use"
show cuckoo-kv store put alice 42
show cuckoo-kv store put bob 'hello world'
show cuckoo-kv store get bob
echo
show cuckoo-kv store del alice
status=0
show cuckoo-kv store get alice || status=$?
echo "(exit status $status: no such key)"

heading "A source file of $lines lines"
awk -v n="$lines" 'BEGIN {
    srand(7)
    for (i = 1; i <= n; i++) {
        w = 1 + int(rand() * 12); line = ""
        for (j = 0; j < w; j++)
            line = line (j ? " " : "") sprintf("w%x", int(rand() * rand() * 5000))
        print (rand() < 0.03 ? "" : line)
    }
}' >source.txt
show head -3 source.txt
printf '%s bytes\n' "$(wc -c <source.txt)"

heading "Import: one record per line, keyed by its content hash (equal lines stored once)"
show cuckoo-kv store import source.txt
show cuckoo-kv store stats

heading "Delete every other record, then put them back (one batch each)"
cuckoo-kv store list | grep -v '^cuckoo-kv:import:' | awk 'NR % 2' >half.keys
printf '%s keys chosen\n' "$(wc -l <half.keys)"
sed 's/^/get /' half.keys | cuckoo-kv store batch >half.values
printf '$ sed '\''s/^/del /'\'' half.keys | cuckoo-kv store batch | sort | uniq -c\n'
sed 's/^/del /' half.keys | cuckoo-kv store batch | sort | uniq -c
status=0
show cuckoo-kv store export partial.txt || status=$?
echo "(exit status $status: records are missing)"
paste -d' ' half.keys half.values | sed 's/^\([^ ]*\) VALUE /put \1 /' >half.puts
printf '$ cuckoo-kv store batch <half.puts | sort | uniq -c\n'
cuckoo-kv store batch <half.puts | sort | uniq -c

heading "Export, and compare with the source"
show cuckoo-kv store export copy.txt
show cmp source.txt copy.txt
echo "identical"
show cuckoo-kv store stats

heading "Compact: rewrite the log without the dead records, atomically"
show cuckoo-kv store compact

heading "kill -9 in the middle of an import: the store opens, every written record intact"
cat source.txt source.txt | sed 's/$/ again/' >bigger.txt
"$kv_tool" crashed import bigger.txt >/dev/null &
sleep 0.3
kill -9 $! 2>/dev/null || true
wait $! 2>/dev/null || true
show cuckoo-kv crashed stats
echo "(truncated: the bytes of the record being written when the process died, if any;"
echo " reading left them in the log, and the next write or 'recover' moves them to"
echo " cuckoo-kv.log.torn-OFFSET before it cuts the log)"
show cuckoo-kv crashed recover

heading "Read more"
echo "examples/logstore/README.md   commands, escaping, exit statuses, the log format"
