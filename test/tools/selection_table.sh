#!/bin/sh
# selection_table.sh - contrib/selection-table.py on a small calibration
# (calibrate-mini-mps.txt: bench.sh comparison tables, allreduce and bcast
# at np 2, with a flip under the 5% hysteresis, a single-size winner that
# is absorbed, a forced one_shot column that ran two_shot, and a table
# between faked nodes that is left out), then the same figures as a CSV
# result file (repeats reduced to their median); --check of the table
# against its data, and of a table that stages everything.
set -eu
: "${GPUCOLL_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 is not installed"; exit 77; }
script=$GPUCOLL_SRCDIR/contrib/selection-table.py
mini=$GPUCOLL_SRCDIR/test/tools/calibrate-mini-mps.txt
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpucoll-seltable.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
rules() { grep -v '^#' "$1" | sed 's/ *#.*//; s/  */ /g'; }

cat >"$tmp/want" <<'EOF'
backend emu
allreduce 2 shared-mps 0 32 staged
allreduce 2 shared-mps 33 4K one_shot
allreduce 2 shared-mps 4097 inf two_shot
bcast 2 shared-mps 0 8 staged
bcast 2 shared-mps 9 inf direct
EOF

echo "\$ $script -o $tmp/table.txt $mini"
python3 "$script" -o "$tmp/table.txt" "$mini" || fail "selection-table.py exited $?"
cat "$tmp/table.txt"
rules "$tmp/table.txt" >"$tmp/got"
diff -u "$tmp/want" "$tmp/got" || fail "the table from the comparison tables"

# The same measurement as CSV rows, two repeats per cell (medians as above);
# --sharing overrides the file name's mode.
python3 - "$mini" "$tmp/runs.csv" <<'EOF'
import re, sys
out = open(sys.argv[2], "w")
out.write("collective,bytes,variant,backend,path,algorithm,ranks,nodes,lat_avg_us\n")
coll = labels = None
for line in open(sys.argv[1]):
    m = re.match(r"# comparison: (\S+), np (\d+),", line)
    if m:
        coll, np, labels = m.group(1), m.group(2), None
    elif line.startswith("#   size"):
        labels = re.findall(r"\S+:(\w+)(?=\s+path)", line)
    elif labels and coll and re.match(r"^\s+\d+\s", line):
        size = line.split()[0]
        for label, (t, taken) in zip(labels, re.findall(r"([\d.]+) \(\s*[\d.]+\)\s+(\S+)", line)):
            path, algo = taken.split("/")
            for d in (-1.0, 1.0):  # two repeats around the median
                out.write(f"{coll},{size},emu:{label},emu,{path},{algo},{np},1,{float(t) + d}\n")
    else:
        coll = coll if not line.startswith("# comparison") else None
EOF
python3 "$script" --sharing '*' -o "$tmp/table-csv.txt" "$tmp/runs.csv" || fail "from CSV: exit $?"
rules "$tmp/table-csv.txt" | grep -v '^backend' >"$tmp/got-csv"
sed -e '/^backend/d' -e 's/shared-mps/*/' "$tmp/want" >"$tmp/want-csv"
diff -u "$tmp/want-csv" "$tmp/got-csv" || fail "the table from the CSV rows"

echo "\$ $script --check $tmp/table.txt $mini"
python3 "$script" --check "$tmp/table.txt" "$mini" >"$tmp/check" || fail "--check of its own data failed"
cat "$tmp/check"
grep -q '^allreduce, np 2, shared-mps: 8 of 8 sizes within 1.10x of the fastest; worst 1.07x at 2048 B (one_shot against ring)$' \
    "$tmp/check" || fail "--check line of allreduce"
printf 'allreduce * * 0 inf staged\nbcast * * 0 inf staged\n' >"$tmp/staged.txt"
if python3 "$script" --check "$tmp/staged.txt" "$mini" >"$tmp/check2"; then
    fail "--check passed a table that stages everything"
fi
cat "$tmp/check2"
grep -q '^bcast, np 2, shared-mps: 1 of 2 sizes within 1.10x of the fastest; worst 25.00x at 1048576 B (staged against direct); over: 1048576:25.00(direct)$' \
    "$tmp/check2" || fail "--check line of a bad table"
if python3 "$script" /dev/null 2>"$tmp/err"; then fail "no input accepted"; fi
grep -q 'no comparison table' "$tmp/err" || fail "no reason for empty input"
echo "PASS: selection_table"
