#!/usr/bin/env bash
# The Debian packages, installed on this machine and used from the installed files:
#   - `make deb` (dpkg-buildpackage over debian/) builds libcuckoofilter0.MINOR,
#     libcuckoofilter-dev, cuckoo, redis-cuckoofilter and python3-cuckoofilter, each holding
#     what it should, stripped, with a -dbgsym package beside each; lintian finds no error
#     and no warning (but the overrides debian/ justifies);
#   - dpkg installs the four; the cuckoo tool from /usr/bin makes, fills and queries a
#     filter, its man page is found; a program built against the installed header with
#     pkg-config and with CMake's find_package runs on the installed shared library;
#     redis-server and valkey-server load the module from /usr/lib/redis/modules/ and answer
#     CF.* commands;
#   - python3 imports the package from /usr/lib/python3/dist-packages; dpkg-shlibdeps
#     finds the dependency of a program linked against the library (the shlibs and the
#     symbols file at work);
#   - the packages are purged, leaving no file and no package state; they are purged
#     again, whatever happened, if the test stops early.
# The packages must not be installed before (the test would replace and then remove a
# user's own). Needs root (dpkg), as `make test` already does for its dependencies.
#
# Usage: deb_install.sh SOURCE_DIR CONSUMER_DIR
# Environment: CC, CMAKE_COMMAND; REDIS_SERVERS (default "redis-server valkey-server"),
# REDIS_CLI (default redis-cli).
set -euo pipefail

die() { echo "deb_install: $*" >&2; exit 1; }

[[ $# -eq 2 ]] || die "usage: $0 SOURCE_DIR CONSUMER_DIR"
src=$1
consumer_dir=$2
cc=${CC:-cc}
cmake=${CMAKE_COMMAND:-cmake}
cli=${REDIS_CLI:-redis-cli}
read -r -a servers <<<"${REDIS_SERVERS:-redis-server valkey-server}"
packages=(cuckoo redis-cuckoofilter libcuckoofilter-dev python3-cuckoofilter)
version=$(sed -nE 's/^#define CF_VERSION_(MAJOR|MINOR|PATCH) +([0-9]+).*/\2/p' "$src/include/cuckoofilter.h" |
          paste -sd.)
minor=${version%.*}
runtime="libcuckoofilter${minor}"
[[ $version == 0.* ]] || runtime="libcuckoofilter${version%%.*}"
packages+=("$runtime")

[[ $(id -u) -eq 0 ]] || die "needs root to install packages with dpkg"
for tool in dpkg dpkg-deb dpkg-shlibdeps lintian pkg-config "$cli" "${servers[@]}"; do
    command -v "$tool" >/dev/null || die "$tool not found (scripts/install-deps installs it)"
done
for p in "${packages[@]}"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        die "$p is installed already: remove it first (this test installs and removes it)"
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cf-deb.XXXXXX")
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    dpkg --purge "${packages[@]}" >"$tmp/purge.log" 2>&1 || cat "$tmp/purge.log" >&2
    rm -rf "$tmp"
}
trap cleanup EXIT

echo "== make deb"
CF_SKIP_DEPS=1 make -C "$src" deb DEB_BUILD_DIR="$tmp/deb" >"$tmp/deb.log" 2>&1 ||
    { tail -30 "$tmp/deb.log" >&2; die "make deb failed"; }
debs=()
for p in "${packages[@]}"; do
    d=$(ls "$tmp/deb/${p}_${version}_"*.deb 2>/dev/null || true)
    [[ -n $d ]] || die "make deb made no package $p"
    debs+=("$d")
    [[ $p == libcuckoofilter-dev ]] || ls "$tmp/deb/${p}-dbgsym_${version}_"*.deb >/dev/null 2>&1 ||
        die "make deb made no ${p}-dbgsym (the debug info of $p)"
done

echo "== lintian"
lintian --fail-on error,warning "${debs[@]}" >"$tmp/lintian.log" 2>&1 ||
    { cat "$tmp/lintian.log" >&2; die "lintian found problems"; }
contents() { dpkg-deb -c "$1" | awk '{ print $6 }' | sed 's|^\./|/|'; }
expect() { # PACKAGE_FILE PATTERN...
    local deb=$1 list
    shift
    list=$(contents "$deb")
    for pattern in "$@"; do
        grep -Eq "^$pattern\$" <<<"$list" || die "$(basename "$deb") lacks $pattern"
    done
}
expect "${debs[0]}" /usr/bin/cuckoo "/usr/share/man/man1/cuckoo\\.1(\\.gz)?"
expect "${debs[1]}" /usr/lib/redis/modules/redis-cuckoofilter\\.so
expect "${debs[2]}" /usr/include/cuckoofilter\\.h "/usr/lib/.*/libcuckoofilter\\.(a|so)" \
    "/usr/lib/.*/pkgconfig/cuckoofilter\\.pc" "/usr/lib/.*/cmake/cuckoofilter/cuckoofilterConfig\\.cmake"
expect "${debs[3]}" "/usr/lib/python3/dist-packages/cuckoofilter/__init__\\.py" \
    "/usr/lib/python3/dist-packages/cuckoofilter/dask\\.py" \
    "/usr/lib/python3/dist-packages/cuckoofilter/_cuckoofilter.*\\.so"
expect "${debs[4]}" "/usr/lib/.*/libcuckoofilter\\.so\\.${minor//./\\.}(\\.[0-9]+)*"

echo "== dpkg -i ${packages[*]}"
dpkg -i "${debs[@]}" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; die "dpkg -i failed"; }

echo "== stripped, with copyright and changelog"
for p in "${packages[@]}"; do
    # (a native package's changelog is changelog.gz)
    [[ -f /usr/share/doc/$p/copyright && -f /usr/share/doc/$p/changelog.gz ]] ||
        die "$p has no copyright or changelog under /usr/share/doc"
done
for f in /usr/bin/cuckoo /usr/lib/redis/modules/redis-cuckoofilter.so /usr/lib/*/libcuckoofilter.so.*.*; do
    if readelf -S "$f" | grep -qF .debug_info; then die "$f still holds its debug info"; fi
done

echo "== python3, from /usr/lib/python3/dist-packages"
(cd "$tmp" && env -u PYTHONPATH /usr/bin/python3 -c '
import cuckoofilter, sys
assert cuckoofilter.__file__.startswith("/usr/lib/python3/dist-packages/"), cuckoofilter.__file__
f = cuckoofilter.CuckooFilter(1000)
f.add(b"alice")
assert b"alice" in f
import cuckoofilter.dask') || die "python3 cannot use the installed package"

echo "== the tool, from /usr/bin"
tool=$(command -v cuckoo)
[[ $tool == /usr/bin/cuckoo ]] || die "cuckoo resolves to $tool, not /usr/bin/cuckoo"
[[ $(cuckoo --version) == *"$version"* ]] || die "cuckoo --version does not say $version"
man -w cuckoo >/dev/null 2>&1 || [[ -e /usr/share/man/man1/cuckoo.1 ]] || die "no man page"
printf 'alice\nbob\n' | cuckoo build "$tmp/t.cf" --quiet || die "cuckoo build failed"
[[ $(cuckoo query "$tmp/t.cf" alice carol --present) == alice ]] || die "cuckoo query gave the wrong keys"

echo "== a program built against the installed library"
# shellcheck disable=SC2046 # pkg-config output is meant to be split into words
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/pc_shared" "$consumer_dir/main.c" \
    $(pkg-config --cflags --libs cuckoofilter) || die "pkg-config build failed"
loaded=$(ldd "$tmp/pc_shared" | awk '/libcuckoofilter\.so/ { print $3 }')
loaded=$(readlink -f "$loaded") # /lib is /usr/lib on a merged-/usr system
[[ $loaded == /usr/lib/* ]] || die "the program loads libcuckoofilter from '${loaded:-nowhere}'"
"$tmp/pc_shared" || die "the pkg-config program failed"
# What a downstream package's build would compute for its Depends: the library's package
# at least the version of the symbols it uses (debian/libcuckoofilter0.2.symbols).
mkdir -p "$tmp/downstream/debian"
printf 'Source: downstream\n\nPackage: downstream\nArchitecture: any\n' \
    >"$tmp/downstream/debian/control"
deps=$(cd "$tmp/downstream" && dpkg-shlibdeps -O "$tmp/pc_shared" 2>"$tmp/shlibdeps.log") ||
    { cat "$tmp/shlibdeps.log" >&2; die "dpkg-shlibdeps failed on a program using the library"; }
[[ $deps == *"$runtime (>= "* ]] || die "dpkg-shlibdeps gave no dependency on $runtime: $deps"
"$cmake" -S "$consumer_dir" -B "$tmp/cmake-build" -DCMAKE_C_COMPILER="$cc" >"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log" >&2; die "find_package did not find the installed package"; }
grep -Fq "found in /usr/lib/" "$tmp/cmake.log" || die "find_package found another cuckoofilter"
"$cmake" --build "$tmp/cmake-build" >"$tmp/cmake-build.log" 2>&1 ||
    { cat "$tmp/cmake-build.log" >&2; die "the CMake consumer did not build"; }
"$tmp/cmake-build/consumer_shared" && "$tmp/cmake-build/consumer_static" ||
    die "the CMake consumer failed"

for server in "${servers[@]}"; do
    echo "== $server --loadmodule /usr/lib/redis/modules/redis-cuckoofilter.so"
    sock="$tmp/$server.sock"
    # A Unix socket only (port 0): no port to collide with another test's server.
    "$server" --port 0 --unixsocket "$sock" --save "" --appendonly no --dir "$tmp" \
        --loadmodule /usr/lib/redis/modules/redis-cuckoofilter.so >"$tmp/$server.log" 2>&1 &
    pids+=("$!")
    up=""
    for _ in $(seq 100); do
        up=$("$cli" -s "$sock" PING 2>/dev/null || true)
        [[ $up == PONG ]] && break
        sleep 0.1
    done
    [[ $up == PONG ]] || { cat "$tmp/$server.log" >&2; die "$server did not start"; }
    [[ $("$cli" -s "$sock" CF.ADD k alice) == 1 ]] || die "$server: CF.ADD failed"
    [[ $("$cli" -s "$sock" CF.EXISTS k alice) == 1 ]] || die "$server: CF.EXISTS missed alice"
    [[ $("$cli" -s "$sock" CF.EXISTS k nobody-here) == 0 ]] || die "$server: CF.EXISTS found a stranger"
    "$cli" -s "$sock" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
done

echo "== dpkg --purge"
dpkg --purge "${packages[@]}" >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log" >&2; die "purge failed"; }
for p in "${packages[@]}"; do
    st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
    [[ -z $st || $st == un* ]] || die "$p is left in state '$st' after the purge"
done
for f in /usr/bin/cuckoo /usr/include/cuckoofilter.h /usr/lib/redis/modules/redis-cuckoofilter.so \
    /usr/lib/python3/dist-packages/cuckoofilter /usr/share/doc/cuckoo; do
    [[ ! -e $f ]] || die "$f is left after the purge"
done
ls /usr/lib/*/libcuckoofilter* >/dev/null 2>&1 && die "the library is left after the purge"

echo "deb_install: the five packages built, checked, installed, used and purged"
