#!/bin/sh
# half.sh - test_half: MPIX_C_FLOAT16 / MPIX_SHORT_FLOAT reductions on the
# emulated device. Accelerated (default selection) on 1-4 ranks: within 1
# ulp of a float-accumulated reference, the same bits on every rank; then
# every collective forced staged on 3 ranks: Open MPI's own bits. Skips where
# the MPI has no MPIX_C_FLOAT16 (Open MPI 4.1: no shortfloat extension).
set -eu
. "$(dirname "$0")/mpi-env.sh"

prog=$MPI_TESTDIR/test_half
run_np 1 "$prog" --expect accelerated
grep -q "no MPIX_C_FLOAT16" "$MPI_OUT" && skip "this Open MPI has no MPIX_C_FLOAT16 (shortfloat extension)"
for np in $TEST_NPS; do
    [ "$np" -gt 1 ] || continue
    run_np "$np" "$prog" --expect accelerated
done
staged=""
for c in allreduce reduce_scatter reduce_scatter_block reduce; do
    staged="$staged --mca coll_gpucoll_${c}_algorithm staged"
done
# shellcheck disable=SC2086 # $staged: several words
run_mpi 3 --mca coll_gpucoll_device "$TEST_DEVICE" $staged -- "$prog" --expect staged \
    --expect reduce_local=accelerated
echo "PASS: test_half"
