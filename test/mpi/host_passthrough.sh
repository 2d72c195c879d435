#!/bin/sh
# host_passthrough.sh - plain MPI on host buffers (a program that knows
# nothing of gpucoll) passes with the component on and off and prints the
# same results on 1, 2, 3 and 4 ranks; coll_base_verbose shows that gpucoll
# is selected in the "on" configuration, so those runs went through it.
set -eu
. "$(dirname "$0")/mpi-env.sh"

prog=$MPI_TESTDIR/test_host_passthrough
results() { # the program's result lines of the last run
    grep -E '^(allreduce|allgather|reduce|test_host_passthrough)' "$MPI_OUT" >"$1" || true
}

# (verbose output goes to stderr and may split stdout lines: a separate run,
# the program's stdout apart)
run_mpi 3 --mca coll_gpucoll_device emu --mca coll_base_verbose 10 -- sh -c "$STDOUT_APART" "$prog"
gpucoll_selected_on 3 MPI_COMM_WORLD ||
    fail "coll_base_verbose does not show gpucoll selected on MPI_COMM_WORLD"

for np in $TEST_NPS; do
    run_mpi "$np" --mca coll_gpucoll_device emu -- "$prog"
    results "$MPI_TMP/on.txt"
    run_mpi "$np" --mca coll '^gpucoll' -- "$prog"
    results "$MPI_TMP/off.txt"
    grep -q '^test_host_passthrough: PASS$' "$MPI_TMP/on.txt" || fail "np=$np: no PASS line (on)"
    [ "$(wc -l <"$MPI_TMP/on.txt")" -ge 40 ] || fail "np=$np: result lines missing (on)"
    if ! diff -u "$MPI_TMP/off.txt" "$MPI_TMP/on.txt"; then
        fail "np=$np: output with the component differs from Open MPI alone"
    fi
done
echo "PASS: host collectives identical with and without coll/gpucoll on $TEST_NPS ranks"
