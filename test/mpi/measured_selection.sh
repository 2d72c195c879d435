#!/bin/sh
# measured_selection.sh - coll_gpucoll_selection_file steers auto on one
# node (gpucoll_bench --csv: the path and algorithm gpucoll's counters
# report per collective and size, on every rank alike):
#  1. a table's ranges (staged included) for allreduce and bcast at np 2,
#     its sharing mode (emu ranks share one emulated GPU whose kernels run
#     side by side: shared-mps) for allgather, a rule for another rank count
#     left alone, the size thresholds where no rule applies; verbose 1
#     prints the rules;
#  2. a forced algorithm wins over the table;
#  3. one_kernel from the table, and its fallback where the GPU's kernels
#     take turns (GPUCOLL_EMU_SERIAL_KERNELS: shared-no-mps, no one-kernel);
#  4. ranks that read different tables, or one that cannot read its file:
#     no deadlock, every rank falls back to the thresholds, and says why;
#  5. a rule whose algorithm the collective lacks is left out with a
#     warning; an unknown algorithm rejects the table with its line number.
set -eu
. "$(dirname "$0")/mpi-env.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"
bench=$GPUCOLL_BUILDDIR/perf/gpucoll_bench
[ -x "$bench" ] || fail "$bench is missing"

# check.py CSV COLL:BYTES=PATH/ALGO...: each row of COLL at BYTES took
# PATH/ALGO on every rank.
cat >"$MPI_TMP/check.py" <<'EOF'
import csv, sys
rows = {(r["collective"], int(r["bytes"])): r for r in csv.DictReader(open(sys.argv[1]))}
bad = []
for want in sys.argv[2:]:
    key, took = want.split("=")
    coll, size = key.split(":")
    r = rows.get((coll, int(size)))
    if r is None:
        bad.append(f"{key}: no row")
    elif f"{r['path']}/{r['algorithm']}" != took or r["paths_agree"] != "yes" or r["check"] != "PASS":
        bad.append(f"{key}: took {r['path']}/{r['algorithm']} (paths agree: {r['paths_agree']}, "
                   f"check {r['check']}), want {took}")
if bad:
    sys.exit("FAIL:\n  " + "\n  ".join(bad))
print(f"{sys.argv[1]}: {len(sys.argv) - 2} sizes took what the table says")
EOF
check() { python3 "$MPI_TMP/check.py" "$@" || fail "algorithms taken"; }
bench_run() { # bench_run CSV [mpirun options...]: every collective, 512 B to 16 KiB
    _csv=$1
    shift
    run_mpi 2 --mca coll_gpucoll_device emu "$@" -- "$bench" all -d emu -m 512:16K -i 5 -w 1 -c \
        --csv "$_csv"
}

table=$MPI_TMP/table.txt
cat >"$table" <<'EOF'
# a selection table for the test
backend emu
allreduce      2  *           0     1K  staged
allreduce      2  *        1025     8K  two_shot
allreduce      2  *        8193    inf  ring
bcast          *  *           0     2K  staged
bcast          *  *        2049    inf  chain
allgather      2  shared-mps  0    inf  ring
allgather      2  gpu-per-rank 0   inf  staged
reduce_scatter_block 3 * 0 inf ring
EOF

echo "== 1. the table steers auto"
bench_run "$MPI_TMP/t1.csv" --mca coll_gpucoll_selection_file "$table" --mca coll_gpucoll_verbose 1
check "$MPI_TMP/t1.csv" allreduce:512=staged/staged allreduce:1024=staged/staged \
    allreduce:2048=accelerated/two_shot allreduce:8192=accelerated/two_shot \
    allreduce:16384=accelerated/ring bcast:2048=staged/staged bcast:4096=accelerated/chain \
    allgather:512=accelerated/ring allgather:16384=accelerated/ring \
    reduce_scatter_block:4096=accelerated/direct reduce:4096=accelerated/direct
n=$(grep -c "selection table $table (2 ranks, shared-mps): allreduce: staged to 1K, two_shot to 8K, ring above" "$MPI_OUT" || true)
[ "$n" -ge 2 ] || fail "verbose 1 did not print the allreduce rules on both ranks ($n)"

echo "== 2. a forced algorithm wins"
bench_run "$MPI_TMP/t2.csv" --mca coll_gpucoll_selection_file "$table" \
    --mca coll_gpucoll_allreduce_algorithm one_shot
check "$MPI_TMP/t2.csv" allreduce:512=accelerated/one_shot bcast:512=staged/staged

echo "== 3. one_kernel from the table, and where the kernels take turns"
printf 'allreduce 2 * 0 4K one_kernel\n' >"$MPI_TMP/ok.txt"
bench_run "$MPI_TMP/t3.csv" --mca coll_gpucoll_selection_file "$MPI_TMP/ok.txt"
check "$MPI_TMP/t3.csv" allreduce:512=accelerated/one_kernel allreduce:4096=accelerated/one_kernel \
    allreduce:8192=accelerated/one_shot
bench_run "$MPI_TMP/t3s.csv" --mca coll_gpucoll_selection_file "$MPI_TMP/ok.txt" \
    -x GPUCOLL_EMU_SERIAL_KERNELS=1 --mca coll_gpucoll_verbose 10
check "$MPI_TMP/t3s.csv" allreduce:512=accelerated/one_shot
grep -q "measured table: one_kernel, but the call does not fit it" "$MPI_OUT" ||
    fail "no reason given for leaving the table's one_kernel"

echo "== 4. ranks with different tables: the thresholds on every rank"
sed 's/two_shot/ring/' "$table" >"$MPI_TMP/table.1"
cp "$table" "$MPI_TMP/table.0"
# shellcheck disable=SC2016 # expanded by each rank's shell
per_rank='OMPI_MCA_coll_gpucoll_selection_file=$0.$OMPI_COMM_WORLD_RANK; export OMPI_MCA_coll_gpucoll_selection_file; shift; exec "$@"'
thresholds="allreduce:512=accelerated/one_shot allreduce:16384=accelerated/one_shot
    bcast:512=accelerated/direct allgather:512=accelerated/direct"
run_mpi 2 --mca coll_gpucoll_device emu -- sh -c "$per_rank" "$MPI_TMP/table" x "$bench" all \
    -d emu -m 512:16K -i 5 -w 1 -c --csv "$MPI_TMP/t4.csv"
# shellcheck disable=SC2086 # words
check "$MPI_TMP/t4.csv" $thresholds
n=$(grep -c "read different selection tables" "$MPI_OUT" || true)
[ "$n" -ge 2 ] || fail "the ranks did not say they read different tables ($n)"
rm "$MPI_TMP/table.1"  # rank 1 cannot read its file
run_mpi 2 --mca coll_gpucoll_device emu -- sh -c "$per_rank" "$MPI_TMP/table" x "$bench" all \
    -d emu -m 512:16K -i 5 -w 1 -c --csv "$MPI_TMP/t4b.csv"
# shellcheck disable=SC2086
check "$MPI_TMP/t4b.csv" $thresholds
grep -q "coll_gpucoll_selection_file: cannot open '$MPI_TMP/table.1'.*; no table used" "$MPI_OUT" ||
    fail "rank 1 did not say it cannot read its file"

echo "== 5. an algorithm the collective lacks; an unknown one"
printf 'bcast * * 0 inf two_shot\nallreduce * * 0 inf staged\n' >"$MPI_TMP/lacks.txt"
bench_run "$MPI_TMP/t5.csv" --mca coll_gpucoll_selection_file "$MPI_TMP/lacks.txt"
check "$MPI_TMP/t5.csv" bcast:512=accelerated/direct allreduce:512=staged/staged
grep -q "lacks.txt:1: bcast has no algorithm 'two_shot' on one node (direct, chain); rule left out" \
    "$MPI_OUT" || fail "no warning for the rule left out"
printf '# ok\nallreduce * * 0 inf staged\nbcast * * 0 inf fastest\n' >"$MPI_TMP/unknown.txt"
bench_run "$MPI_TMP/t5b.csv" --mca coll_gpucoll_selection_file "$MPI_TMP/unknown.txt"
# shellcheck disable=SC2086
check "$MPI_TMP/t5b.csv" $thresholds
grep -q "unknown.txt:3: unknown algorithm 'fastest'.*; no table used" "$MPI_OUT" ||
    fail "no error naming the line of the unknown algorithm"
echo "PASS: measured_selection"
