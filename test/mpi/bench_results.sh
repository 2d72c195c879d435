#!/bin/sh
# bench_results.sh - gpucoll_bench --csv: on a small run (np 2, device
# buffers of the test device, four sizes, every collective, validated) the
# result file has the documented columns, one row per collective and size,
# the sizes asked for, the path gpucoll's counters report, latencies with
# min <= median <= max, bandwidths that follow from them, and the same
# figures as the printed table; host buffers with the component off say
# "off"; a file that cannot be written stops the run before it measures.
# contrib/plot-bench.py is tested by test/tools/plot_bench.sh.
set -eu
. "$(dirname "$0")/mpi-env.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"

bench=$GPUCOLL_BUILDDIR/perf/gpucoll_bench
[ -x "$bench" ] || fail "$bench is missing"

# check.py CSV TABLE NP BACKEND COLLS PATHS VARIANT COMMIT SIZES...: the
# result file CSV of a run whose printed output is TABLE. COLLS: the
# collectives run, in order (comma list); PATHS: coll=path|path,... the
# paths each may report ("*": every other collective).
cat >"$MPI_TMP/check.py" <<'EOF'
import csv, re, sys

path, table, np, backend, colls, paths, variant, commit = sys.argv[1:9]
np, colls = int(np), colls.split(",")
sizes = [int(s) for s in sys.argv[9:]]
allowed = {c: p.split("|") for c, p in (x.split("=") for x in paths.split(","))}
columns = ("collective,bytes,count,datatype,op,form,in_place,root,variant,backend,path,algorithm,"
           "paths_agree,ranks,nodes,runs,lat_avg_us,lat_min_us,lat_median_us,lat_max_us,algbw_GBps,"
           "busbw_GBps,busbw_factor,iterations,peer_bytes_per_call,syncs_per_call,check,version,commit,"
           "date,host,source").split(",")
factor = {"allreduce": 2 * (np - 1) / np, "allgather": (np - 1) / np, "reduce_scatter": (np - 1) / np,
          "reduce_scatter_block": (np - 1) / np, "bcast": 1.0, "reduce": 1.0}
with open(path, newline="") as f:
    reader = csv.DictReader(f)
    if reader.fieldnames != columns:
        sys.exit(f"FAIL: header {reader.fieldnames}\n  want {columns}")
    rows = list(reader)
# the printed table: size count avg min max algbw busbw iters path algorithm ...
printed = [l.split() for l in open(table) if re.match(r"^ +[0-9]", l)]
if len(rows) != len(printed) or len(rows) != len(colls) * len(sizes):
    sys.exit(f"FAIL: {len(rows)} rows, {len(printed)} printed, want {len(colls) * len(sizes)}")
bad = []
for i, (r, p) in enumerate(zip(rows, printed)):
    coll, b = r["collective"], int(r["bytes"])
    asked = sizes[i % len(sizes)]
    if coll in ("allgather", "reduce_scatter_block"):  # whole blocks of np floats
        asked = asked // 4 // np * np * 4
    lo, avg, med, hi = (float(r[k]) for k in ("lat_min_us", "lat_avg_us", "lat_median_us", "lat_max_us"))
    algbw, busbw = float(r["algbw_GBps"]), float(r["busbw_GBps"])
    checks = [
        (coll == colls[i // len(sizes)], "collective in the order run"),
        (b == asked, f"bytes, asked {asked}"),
        (int(r["count"]) * 4 == b and r["datatype"] == "float", "count and datatype"),
        (0 < lo <= med <= hi and lo <= avg <= hi, f"0 < min <= median, avg <= max: {lo} {med} {avg} {hi}"),
        (r["path"] in allowed.get(coll, allowed.get("*", [])), f"path {r['path']}"),
        (r["algorithm"] != "" and r["paths_agree"] == "yes", "algorithm, paths agree"),
        ((r["ranks"], r["nodes"], r["runs"]) == (str(np), "1", "1"), "ranks, nodes, runs"),
        ((r["backend"], r["variant"], r["commit"]) == (backend, variant, commit), "backend, variant, commit"),
        (abs(algbw - b / avg / 1e3) <= 1e-3 * algbw + 1e-6, "algbw = bytes / avg"),
        (abs(float(r["busbw_factor"]) - factor[coll]) < 1e-4
         and abs(busbw - algbw * factor[coll]) <= 1e-4 * algbw + 1e-6, "busbw = algbw x nccl-tests' factor"),
        ((r["iterations"], r["check"], r["source"]) == ("20", "PASS", "gpucoll_bench"),
         "iterations, check, source"),
        (re.match(r"^\d+\.\d+\.\d+$", r["version"]) is not None, "version"),
        (re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", r["date"]) is not None, "date (ISO 8601, UTC)"),
        # the same measurement as the table (2 decimals there)
        ((int(p[0]), int(p[1])) == (b, int(r["count"])), "table: size, count"),
        (all(abs(float(p[k]) - v) <= 0.0051 for k, v in ((2, avg), (3, lo), (4, hi))), f"table: {p[2:5]}"),
        ((p[8], p[9]) == (r["path"], r["algorithm"]), f"table: {p[8]}/{p[9]}"),
    ]
    bad += [f"row {i + 2} ({coll} {b}): {what}" for ok, what in checks if not ok]
if bad:
    sys.exit("FAIL:\n  " + "\n  ".join(bad))
print(f"{path}: {len(rows)} rows, columns and figures as expected")
EOF

sizes="512 1024 2048 4096"
# Device buffers, every collective: allreduce and bcast accelerated, the
# others accelerated or staged. A label with a comma and quotes (CSV quoting).
run_np 2 "$bench" all -d "$TEST_DEVICE" -m 512:4K -i 20 -w 2 -c --csv "$MPI_TMP/dev.csv" \
    --label "$TEST_DEVICE,test \"quoted\"" --commit test-commit
grep -q '^# validation: all sizes passed' "$MPI_OUT" || fail "validation did not pass"
cp "$MPI_OUT" "$MPI_TMP/dev.txt"
# shellcheck disable=SC2086 # $sizes: words
python3 "$MPI_TMP/check.py" "$MPI_TMP/dev.csv" "$MPI_TMP/dev.txt" 2 "$TEST_DEVICE" \
    allreduce,bcast,allgather,reduce_scatter,reduce_scatter_block,reduce \
    "allreduce=accelerated,bcast=accelerated,*=accelerated|staged" "$TEST_DEVICE,test \"quoted\"" \
    test-commit $sizes || fail "device-buffer result file"
head -n 3 "$MPI_TMP/dev.csv"

# Host buffers, component off: path "off", the default variant "host,off".
run_mpi 2 --mca coll ^gpucoll -- "$bench" allreduce -d host -m 512:4K -i 20 -w 2 -c \
    --csv "$MPI_TMP/host.csv"
cp "$MPI_OUT" "$MPI_TMP/host.txt"
# shellcheck disable=SC2086
python3 "$MPI_TMP/check.py" "$MPI_TMP/host.csv" "$MPI_TMP/host.txt" 2 host allreduce \
    "allreduce=off" "host,off" "" $sizes || fail "host-buffer result file"

# A file that cannot be written: exit 2 before measuring, with the reason.
if try_mpi 1 --mca coll_gpucoll_device "$TEST_DEVICE" -- "$bench" bcast -m 64 \
    --csv "$MPI_TMP/no/such/dir.csv"; then
    fail "--csv into a missing directory succeeded"
fi
grep -q -- "--csv $MPI_TMP/no/such/dir.csv: No such file" "$MPI_OUT" || fail "no reason given"
grep -q '^ *64 ' "$MPI_OUT" && fail "it measured before failing"
echo "PASS: bench_results"
