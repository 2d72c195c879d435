#!/bin/sh
# plot_bench.sh - contrib/plot-bench.py on a small result file
# (bench-results-mini.csv: allreduce, np 2, four variants, two repeats):
# it writes the latency and the bus-bandwidth plot, non-empty PNGs of the
# expected size, prints their paths and nothing else on stdout; bad input
# and filters that leave nothing fail with exit 2. matplotlib comes from
# contrib/plot-deps.sh (installed into $GPUCOLL_CACHE/venv the first time,
# about 20 s); the test is skipped when it cannot be had (no network).
set -eu
: "${GPUCOLL_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 is not installed"; exit 77; }
plot=$GPUCOLL_SRCDIR/contrib/plot-bench.py
mini=$GPUCOLL_SRCDIR/test/tools/bench-results-mini.csv
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpucoll-plot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}

if ! "$GPUCOLL_SRCDIR/contrib/plot-deps.sh" >"$tmp/deps.out" 2>"$tmp/deps.err"; then
    cat "$tmp/deps.err"
    echo "SKIP: matplotlib cannot be had here (contrib/plot-deps.sh failed: $(tail -n 1 "$tmp/deps.err"))"
    exit 77
fi
echo "matplotlib from: $(tail -n 1 "$tmp/deps.out")"

echo "\$ $plot -o $tmp/png -p t- $mini"
python3 "$plot" -o "$tmp/png" -p t- "$mini" >"$tmp/out" || fail "plot-bench.py exited $?"
cat "$tmp/out"
printf '%s\n' "$tmp/png/t-allreduce-latency.png" "$tmp/png/t-allreduce-busbw.png" >"$tmp/want"
cmp -s "$tmp/out" "$tmp/want" || fail "printed paths differ from: $(cat "$tmp/want")"
# PNG signature, IHDR 800 x 520 (8 x 5.2 inches at 100 dpi), more than a blank canvas
python3 - "$tmp/png/t-allreduce-latency.png" "$tmp/png/t-allreduce-busbw.png" <<'EOF' || fail "not the PNGs expected"
import struct, sys
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path}: not a PNG"
    w, h = struct.unpack(">II", data[16:24])
    assert (w, h) == (800, 520), f"{path}: {w}x{h}"
    assert 10000 < len(data) < 150000, f"{path}: {len(data)} bytes"
    print(f"{path}: PNG {w}x{h}, {len(data)} bytes")
EOF

# Filters: one variant, one rank count that is not there.
python3 "$plot" -o "$tmp/one" --include '^host,off$' "$mini" >"$tmp/out" || fail "--include"
[ "$(wc -l <"$tmp/out")" = 2 ] || fail "--include: $(cat "$tmp/out")"
rc=0
python3 "$plot" -o "$tmp/none" -n 3 "$mini" 2>"$tmp/err" || rc=$?
if [ "$rc" != 2 ] || ! grep -q "no rows to plot" "$tmp/err"; then fail "-n 3: exit $rc, $(cat "$tmp/err")"; fi
# Not a result file.
rc=0
python3 "$plot" -o "$tmp/none" "$0" 2>"$tmp/err" || rc=$?
if [ "$rc" != 2 ] || ! grep -q "not a gpucoll_bench result file" "$tmp/err"; then fail "bad file: exit $rc"; fi
[ ! -e "$tmp/none" ] || fail "files written for bad input"
echo "PASS: plot_bench"
