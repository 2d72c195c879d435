#!/bin/sh
# mixed.sh - test_mixed on 1, 2, 3 and 4 ranks with the component on the
# emulated device: calls mixing device and host buffers across ranks and within a rank.
# A rank with device buffers in a mixed call: staged or accelerated ("any").
set -eu
. "$(dirname "$0")/mpi-env.sh"

for np in $TEST_NPS; do
    run_np "$np" "$MPI_TESTDIR/test_mixed" --expect any
done
echo "PASS: test_mixed on $TEST_NPS ranks"
