#!/usr/bin/env bash
# The two ways the package is installed, each into a temporary place and used from
# outside the source tree:
#   1. `make install`'s rule: `cmake --install BUILD_DIR --component python --prefix P`,
#      then import it from P's package directory with PYTHON;
#   2. `pip install --no-index --no-build-isolation SRC_DIR/python` into a fresh
#      virtualenv of PYTHON with no setuptools and no wheel (offline, as on a machine that
#      reaches no package index), then import it there, and `pip uninstall` it.
# The temporary directory is removed on exit.
#
# Usage: install_check.sh PYTHON BUILD_DIR SOURCE_DIR
set -euo pipefail

die() { echo "install_check: $*" >&2; exit 1; }

[[ $# -eq 3 ]] || die "usage: $0 PYTHON BUILD_DIR SOURCE_DIR"
python=$1
build_dir=$(cd "$2" && pwd)
source_dir=$(cd "$3" && pwd)
cmake=${CMAKE_COMMAND:-cmake}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cf-python-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" # never import the source tree's package by accident

# What each installed copy must do: the same answers as here, from where it was installed.
smoke='
import os, sys, cuckoofilter as cf
where = os.path.realpath(cf.__file__)
assert where.startswith(os.path.realpath(sys.argv[1])), where
f = cf.CuckooFilter(capacity=1000, seed=1)
f.add_many([b"a", "b", 3])
assert b"a" in f and "b" in f and 3 in f and len(f) == 3
g = cf.CuckooFilter.from_bytes(f.to_bytes())
assert g.to_bytes() == f.to_bytes()
print("imported", cf.__version__, "from", os.path.dirname(where))
'

echo "== cmake --install --component python"
"$cmake" --install "$build_dir" --component python --prefix "$tmp/prefix" >"$tmp/install.log" ||
    { cat "$tmp/install.log" >&2; die "cmake --install failed"; }
init=$(find "$tmp/prefix" -path '*/cuckoofilter/__init__.py' -print -quit)
[[ -n $init ]] || die "cmake --install put no cuckoofilter/__init__.py under the prefix"
site=$(dirname "$(dirname "$init")")
for f in __init__.pyi py.typed; do
    [[ -f $site/cuckoofilter/$f ]] || die "not installed: cuckoofilter/$f"
done
PYTHONPATH=$site "$python" -c "$smoke" "$tmp/prefix" || die "the installed package failed"

echo "== pip install --no-index --no-build-isolation into a bare virtualenv"
"$python" -m venv "$tmp/venv" || die "python -m venv failed (Debian: python3-venv)"
venv_python=$tmp/venv/bin/python
"$venv_python" -m pip uninstall -q -y setuptools wheel >/dev/null 2>&1 || true
"$venv_python" -m pip install -q --no-index --no-build-isolation "$source_dir/python" \
    >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log" >&2; die "pip install failed"; }
"$venv_python" -c "$smoke" "$tmp/venv" || die "the pip-installed package failed"
"$venv_python" -m pip uninstall -q -y cuckoofilter || die "pip uninstall failed"
if "$venv_python" -c "import cuckoofilter" 2>/dev/null; then
    die "cuckoofilter still imports after pip uninstall"
fi
[[ ! -e $source_dir/python/build && ! -e $source_dir/python/cuckoofilter.egg-info ]] ||
    die "pip left build files in the source tree"
echo "install_check: both installs work"
