#!/usr/bin/env bash
# The README's two figures: runs `cf-bench-speed --figures` (about a minute) for the data,
# then plots it with gnuplot into docs/img/fpr-vs-bits.png and
# docs/img/throughput-vs-load.png. `make figures` runs this after building.
#
# Usage: bench/figures.sh [BUILD_DIR] [--quick] [--replot]
#   BUILD_DIR  where cf-bench-speed was built (default: build); the CSVs go to
#              BUILD_DIR/figures
#   --quick    small filters, a few seconds, PNGs in BUILD_DIR/figures-quick instead of
#              docs/img (a smoke test of this script)
#   --replot   plot the CSVs of the last run again, without measuring (to edit the plots)
set -euo pipefail

die() { echo "figures: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
quick=
replot=false
for arg in "$@"; do
    case $arg in
    --quick) quick=--quick ;;
    --replot) replot=true ;;
    -*) die "unknown option $arg (usage: bench/figures.sh [BUILD_DIR] [--quick] [--replot])" ;;
    *) build=$arg ;;
    esac
done
bench=$build/cf-bench-speed
$replot || [[ -x $bench ]] || die "$bench not found: build first (make)"
command -v gnuplot >/dev/null || die "gnuplot not found: run scripts/install-deps (gnuplot-nox)"

if [[ -n $quick ]]; then
    data=$build/figures-quick
    out=$data
else
    data=$build/figures
    out=$root/docs/img
fi
mkdir -p "$data" "$out"
if $replot; then
    [[ -f $data/fpr-vs-bits.csv ]] || die "no $data/fpr-vs-bits.csv to plot: run without --replot"
else
    "$bench" --figures "$data" $quick
fi

# The second figure's subtitle: the filter's shape and size, as cf-bench-speed wrote it.
meta=$(cat "$data/throughput-vs-load.txt")

# Titles are gnuplot "enhanced text": \\_ in this here-document is a literal underscore.
gnuplot <<GNUPLOT
set terminal pngcairo size 900,560 font "sans,11"
set datafile separator ","
set key top right box opaque
set grid
set logscale y
set format y "10^{%T}"
set xlabel "bits per key (table bytes x 8 / keys)"
set ylabel "false-positive rate"
set xrange [3.5:22]
set title "False positives against memory\n{/*0.85 cuckoo filter: b = 4, f = 4..20, filled to capacity; libbloom at the same bits per key}"
ln2 = log(2)
k(x) = ceil(x * ln2)
set output "$out/fpr-vs-bits.png"
plot "$data/fpr-vs-bits.csv" skip 1 using 2:5 with linespoints pt 7 lc rgb "#1f77b4" \
        title "cuckoo filter, measured", \
     "" skip 1 using 2:6 with lines dt 2 lc rgb "#1f77b4" \
        title "cuckoo filter, expected (cf\\\\_expected\\\\_fpr)", \
     "" skip 1 using 8:10 with linespoints pt 5 lc rgb "#d62728" title "libbloom, measured", \
     (1 - exp(-k(x) / x))**k(x) with lines dt 2 lc rgb "#d62728" \
        title "Bloom filter, theory: (1-e^{-k/x})^k, k = ceil(x ln 2)", \
     2**(-x) with lines lc rgb "#555555" title "information-theoretic limit: 2^{-x}"
GNUPLOT

gnuplot <<GNUPLOT
set terminal pngcairo size 1000,560 font "sans,11"
set datafile separator ","
set key outside right center box
set grid
set xlabel "load factor (items / slots)"
set ylabel "million operations per second"
set xrange [0:1]
set yrange [0:*]
set title "Throughput against load\n{/*0.85 $meta}"
set output "$out/throughput-vs-load.png"
plot "$data/throughput-vs-load.csv" skip 1 using 1:5 with linespoints pt 7 lc rgb "#1f77b4" \
        title "cf\\\\_contains, absent", \
     "" skip 1 using 1:4 with linespoints pt 5 lc rgb "#2ca02c" title "cf\\\\_contains, present", \
     "" skip 1 using 1:7 with linespoints pt 6 lc rgb "#1f77b4" \
        title "cf\\\\_contains\\\\_keys, absent", \
     "" skip 1 using 1:6 with linespoints pt 4 lc rgb "#2ca02c" \
        title "cf\\\\_contains\\\\_keys, present", \
     "" skip 1 using 1:3 with linespoints pt 9 lc rgb "#d62728" \
        title "cf\\\\_add (throughput of that step)", \
     "" skip 1 using 1:8 with lines dt 2 lc rgb "#555555" title "limit: 2 random reads per key", \
     "" skip 1 using 1:9 with lines dt 3 lc rgb "#555555" title "batched limit"
GNUPLOT
echo "figures: $out/fpr-vs-bits.png $out/throughput-vs-load.png (data in $data)"
