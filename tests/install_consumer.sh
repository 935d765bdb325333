#!/usr/bin/env bash
# Install the build into a temporary prefix and use it like a user would: a consumer
# program (tests/consumer/main.c) is built
#   1. by a CMake project with find_package(cuckoofilter CONFIG REQUIRED), linking the
#      shared and the static target;
#   2. with `pkg-config --cflags --libs cuckoofilter` (shared), and with
#      `pkg-config --static` into a fully static executable;
# and every build is run. The temporary directory is removed on exit.
#
# Usage: install_consumer.sh BUILD_DIR CONSUMER_SOURCE_DIR
# Environment: CC (compiler, default cc), CMAKE_COMMAND (default cmake).
set -euo pipefail

die() { echo "install_consumer: $*" >&2; exit 1; }

[[ $# -eq 2 ]] || die "usage: $0 BUILD_DIR CONSUMER_SOURCE_DIR"
build_dir=$(cd "$1" && pwd)
consumer_dir=$(cd "$2" && pwd)
cc=${CC:-cc}
cmake=${CMAKE_COMMAND:-cmake}
command -v pkg-config >/dev/null || die "pkg-config not found: run scripts/install-deps"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cf-install-consumer.XXXXXX")
# `cmake --install` rewrites the build tree's install_manifest.txt; keep the one a real
# install left there.
manifest="$build_dir/install_manifest.txt"
[[ -f $manifest ]] && cp "$manifest" "$tmp/install_manifest.saved"
cleanup() {
    if [[ -f $tmp/install_manifest.saved ]]; then
        cp "$tmp/install_manifest.saved" "$manifest"
    else
        rm -f "$manifest"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

prefix="$tmp/prefix"
echo "== cmake --install $build_dir --prefix $prefix"
"$cmake" --install "$build_dir" --prefix "$prefix" >"$tmp/install.log" ||
    { cat "$tmp/install.log" >&2; die "cmake --install failed"; }

# Where the libraries went depends on GNUInstallDirs (lib, lib64, lib/<multiarch>).
pc_file=$(find "$prefix" -name cuckoofilter.pc -print -quit)
[[ -n $pc_file ]] || die "cuckoofilter.pc was not installed"
pc_dir=$(dirname "$pc_file")
libdir=$(dirname "$pc_dir")
for f in "$prefix/include/cuckoofilter.h" "$libdir/libcuckoofilter.a" \
         "$libdir/libcuckoofilter.so" \
         "$libdir/cmake/cuckoofilter/cuckoofilterConfig.cmake" \
         "$libdir/cmake/cuckoofilter/cuckoofilterConfigVersion.cmake"; do
    [[ -e $f ]] || die "not installed: ${f#"$prefix"/}"
done
# The name programs load it by (libcuckoofilter.so.0.MINOR before 1.0).
soname=$(readelf -d "$libdir/libcuckoofilter.so" | sed -nE 's/.*\(SONAME\).*\[(.*)\].*/\1/p')
[[ -n $soname && -e $libdir/$soname ]] || die "not installed: the soname's file ${soname:-(no SONAME)}"
grep -q "^prefix=$prefix\$" "$pc_file" || die "cuckoofilter.pc does not name prefix $prefix"

# Runs a consumer and checks that the shared ones load libcuckoofilter from the prefix.
run_consumer() {
    local exe=$1 kind=$2 resolved
    if [[ $kind == shared ]]; then
        resolved=$(LD_LIBRARY_PATH="$libdir" ldd "$exe" | awk '/libcuckoofilter\.so/ { print $3 }')
        [[ $resolved == "$libdir"/* ]] ||
            die "$exe loads libcuckoofilter from '${resolved:-nowhere}', not from $libdir"
    else
        resolved=$(ldd "$exe" 2>&1 || true)
        [[ $resolved != *libcuckoofilter* ]] || die "$exe should not need libcuckoofilter.so"
    fi
    LD_LIBRARY_PATH="$libdir" "$exe" || die "$exe failed (exit $?)"
}

echo "== CMake consumer: find_package(cuckoofilter CONFIG REQUIRED)"
# Only the temporary prefix may satisfy find_package: no package registries.
"$cmake" -S "$consumer_dir" -B "$tmp/cmake-build" \
    -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF >"$tmp/cmake-configure.log" ||
    { cat "$tmp/cmake-configure.log" >&2; die "consumer project did not configure"; }
grep -F "found in $libdir/cmake/cuckoofilter" "$tmp/cmake-configure.log" >/dev/null ||
    { cat "$tmp/cmake-configure.log" >&2; die "find_package found a cuckoofilter outside $prefix"; }
"$cmake" --build "$tmp/cmake-build" >"$tmp/cmake-build.log" ||
    { cat "$tmp/cmake-build.log" >&2; die "consumer project did not build"; }
run_consumer "$tmp/cmake-build/consumer_shared" shared
run_consumer "$tmp/cmake-build/consumer_static" static

echo "== pkg-config consumer: shared"
export PKG_CONFIG_PATH="$pc_dir"
# shellcheck disable=SC2046 # pkg-config output is meant to be split into words
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/pc_shared" "$consumer_dir/main.c" \
    $(pkg-config --cflags --libs cuckoofilter) || die "pkg-config shared build failed"
run_consumer "$tmp/pc_shared" shared

echo "== pkg-config consumer: --static (fully static executable)"
# A fully static link proves that Libs.private lists everything the archive needs.
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Wextra -Werror -static -o "$tmp/pc_static" "$consumer_dir/main.c" \
    $(pkg-config --static --cflags --libs cuckoofilter) || die "pkg-config --static build failed"
run_consumer "$tmp/pc_static" static

echo "install_consumer: all consumers built and ran"
