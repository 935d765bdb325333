#!/usr/bin/env bash
# Build and run bench/peers/side.c: this library beside the paper authors' cuckoo filter
# and fastfilter_cpp's, in one process (issue 34's harness). The peers' sources are not in
# this repository (nor fetched by it): clone them yourself, anywhere.
#
# Usage: bench/peers/run.sh AUTHORS_DIR FASTFILTER_DIR [N [Q [ROUNDS]]]
#   AUTHORS_DIR     a checkout of github.com/efficient/cuckoofilter
#   FASTFILTER_DIR  a checkout of github.com/FastFilter/fastfilter_cpp
#   N, Q, ROUNDS    as bench/peers/side.c says (default 50000000 2000000 9)
# Environment: BUILD (default build), the CMake build directory with libcuckoofilter;
#   CPU (default 1), the core the run is pinned to.
# The peers allocate with new[], without asking for huge pages, where the library and the
# limit's array do: for a like-for-like run, set transparent huge pages to "always"
# (echo always > /sys/kernel/mm/transparent_hugepage/enabled, as root) and back after;
# side prints the setting it ran with.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '5,9p' "$0" >&2; exit 2; }
authors=$1 fastfilter=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD:-$root/build}
lib=$(ls "$build"/libcuckoofilter.so.* 2>/dev/null | head -n 1)
[[ -n $lib ]] || { echo "run.sh: no libcuckoofilter in $build (make first)" >&2; exit 2; }
[[ -f $authors/src/cuckoofilter.h ]] || { echo "run.sh: $authors is not efficient/cuckoofilter" >&2; exit 2; }
[[ -f $fastfilter/src/cuckoo/cuckoofilter_stable.h ]] ||
    { echo "run.sh: $fastfilter is not fastfilter_cpp" >&2; exit 2; }
out=$(mktemp -d "${TMPDIR:-/tmp}/cf-peers.XXXXXX")
trap 'rm -rf "$out"' EXIT
flags=(-O3 -march=native)
g++ "${flags[@]}" -std=c++17 -w -I"$here" -I"$authors/src" -c "$here/authors.cc" -o "$out/authors.o"
g++ "${flags[@]}" -std=c++17 -w -I"$here" -I"$fastfilter/src" -I"$fastfilter/src/cuckoo" \
    -c "$here/fastfilter.cc" -o "$out/fastfilter.o"
gcc "${flags[@]}" -std=c11 -Wall -Wextra -I"$root/include" -c "$here/side.c" -o "$out/side.o"
g++ -o "$out/side" "$out/side.o" "$out/authors.o" "$out/fastfilter.o" "$lib" -Wl,-rpath,"$build"
echo "library: $lib; compilers: $(gcc --version | head -n 1)"
taskset -c "${CPU:-1}" "$out/side" "$@"
