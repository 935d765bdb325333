#!/usr/bin/env bash
# The shared library exports the public API and nothing else:
#   - every defined dynamic symbol starts with cf_ (no leaked helpers, no xxHash);
#   - every exported cf_ symbol is declared CF_API in the public header, and every
#     function the header declares CF_API is exported;
#   - the SONAME is libcuckoofilter.so.<major> from 1.0 on, libcuckoofilter.so.0.<minor>
#     before (each 0.x may break the ABI).
#
# Usage: exported_symbols.sh LIBCUCKOOFILTER_SO PUBLIC_HEADER
# Environment: NM (default nm), READELF (default readelf).
set -euo pipefail

die() { echo "exported_symbols: $*" >&2; exit 1; }
indent() { sed 's/^/    /'; }

[[ $# -eq 2 ]] || die "usage: $0 LIBCUCKOOFILTER_SO PUBLIC_HEADER"
lib=$1
header=$2
nm=${NM:-nm}
readelf=${READELF:-readelf}
[[ -f $lib ]] || die "no such library: $lib"
[[ -f $header ]] || die "no such header: $header"

# Defined dynamic symbols, names only (nm prints "address type name").
exported=$("$nm" -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u)
[[ -n $exported ]] || die "$lib exports no symbols at all"

status=0
soname=""
others=$(grep -v '^cf_' <<<"$exported" || true)
if [[ -n $others ]]; then
    echo "exported_symbols: $lib exports symbols outside the cf_ namespace:" >&2
    indent <<<"$others" >&2
    echo "  (give them internal linkage, or keep them unmarked: the library is built with" \
         "-fvisibility=hidden and only CF_API functions should be visible)" >&2
    status=1
fi

# The functions the header declares: the identifier before the first '(' of each
# declaration that starts with CF_API.
declared=$(sed -nE 's/^CF_API[^(]*[ *](cf_[A-Za-z0-9_]+)[ ]*\(.*/\1/p' "$header" | sort -u)
[[ -n $declared ]] || die "found no CF_API declarations in $header"

undeclared=$(comm -13 <(echo "$declared") <(grep '^cf_' <<<"$exported" || true))
if [[ -n $undeclared ]]; then
    echo "exported_symbols: exported but not declared CF_API in $(basename "$header"):" >&2
    indent <<<"$undeclared" >&2
    status=1
fi
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
if [[ -n $missing ]]; then
    echo "exported_symbols: declared CF_API in $(basename "$header") but not exported:" >&2
    indent <<<"$missing" >&2
    status=1
fi

if command -v "$readelf" >/dev/null; then
    soname=$("$readelf" -d "$lib" | sed -nE 's/.*\(SONAME\).*\[(.*)\].*/\1/p')
    if [[ ! $soname =~ ^libcuckoofilter\.so\.(0\.[0-9]+|[1-9][0-9]*)$ ]]; then
        echo "exported_symbols: SONAME is '${soname:-missing}', expected libcuckoofilter.so.<major>" \
             "(libcuckoofilter.so.0.<minor> before 1.0)" >&2
        status=1
    fi
fi

if [[ $status -eq 0 ]]; then
    echo "exported_symbols: $(wc -l <<<"$exported") symbols, all cf_ and all declared" \
         "${soname:+(SONAME $soname)}"
fi
exit "$status"
