#!/bin/sh
# mixed.sh - test_mixed on 1, 2, 3 and 4 ranks with the component on the
# emulated device: calls mixing device and host buffers across ranks and within a rank.
# A rank with device buffers in a mixed call: staged or accelerated ("any").
# Then at np 4 with coll_gpucoll_uniform_memory broken: no hang.
set -eu
. "$(dirname "$0")/mpi-env.sh"

for np in $TEST_NPS; do
    run_np "$np" "$MPI_TESTDIR/test_mixed" --expect any
done
# The uniform-memory assertion broken on one node: ignored there, so the
# mixed calls are staged and right instead of hanging.
run_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_uniform_memory 1 -- \
    "$MPI_TESTDIR/test_mixed" --expect any
echo "PASS: test_mixed on $TEST_NPS ranks"
