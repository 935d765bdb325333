#!/usr/bin/env bash
# The library's layering (src/LAYERS): each file in src/ includes, and each compiled object
# calls or reads, only files of its own unit and of the layers below it. Fails, naming the
# file and what it reaches up (or across) to, on any other arrow, and on a file of src/
# that src/LAYERS does not place.
#
# Usage: tests/layers.sh SRC_DIR OBJECT...   (the objects of the library's sources, as
#        compiled: their undefined cf_ and cf__ symbols are the calls between files)
set -euo pipefail
src=${1:?usage: layers.sh SRC_DIR OBJECT...}
shift
command -v nm >/dev/null || { echo "layers: nm (binutils) is not installed" >&2; exit 1; }
[[ -f $src/LAYERS ]] || { echo "layers: $src/LAYERS is missing" >&2; exit 1; }
declare -A layer unit
n=0
while read -r line; do
    line=${line%%#*}
    [[ -n ${line// /} ]] || continue
    for u in $line; do
        for file in ${u//+/ }; do
            [[ -z ${layer[$file]:-} ]] || { echo "layers: $file is placed twice" >&2; exit 1; }
            layer[$file]=$n
            unit[$file]=$u
        done
    done
    n=$((n + 1))
done <"$src/LAYERS"
bad=0
# An arrow from file a to file b is allowed if b is of a's unit or of a layer below
# (a greater line number: the list is top first).
check() {
    local a=$1 b=$2 what=$3
    if [[ ${unit[$a]} != "${unit[$b]}" && ${layer[$b]} -le ${layer[$a]} ]]; then
        echo "layers: $a $what $b, which is not below it (src/LAYERS)" >&2
        bad=1
    fi
}
for path in "$src"/*; do
    file=${path##*/}
    [[ $file == LAYERS ]] && continue
    [[ -n ${layer[$file]:-} ]] || { echo "layers: src/$file is in no layer of src/LAYERS" >&2; bad=1; continue; }
    while read -r inc; do
        [[ -n ${layer[$inc]:-} ]] || continue # not the library's (the public header, libc)
        check "$file" "$inc" includes
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$path")
done
# Which file defines each symbol, then who uses it.
declare -A home
objects=()
for obj in "$@"; do
    file=$(basename "$obj" .o) # fast.c.o -> fast.c
    [[ -n ${layer[$file]:-} ]] || { echo "layers: object $obj is of no source in src/LAYERS" >&2; bad=1; continue; }
    objects+=("$obj")
    while read -r sym; do
        home[$sym]=$file
    done < <(nm --defined-only "$obj" | awk '$2 ~ /^[TDRBC]$/ && $3 ~ /^cf_/ {print $3}')
done
for obj in "${objects[@]}"; do
    file=$(basename "$obj" .o)
    while read -r sym; do
        [[ -n ${home[$sym]:-} ]] || continue
        check "$file" "${home[$sym]}" "uses $sym of"
    done < <(nm --undefined-only "$obj" | awk '$2 ~ /^cf_/ {print $2}' | sort -u)
done
[[ $bad -eq 0 ]] && echo "layers: ${#objects[@]} objects and every file of $src keep to src/LAYERS"
exit "$bad"
