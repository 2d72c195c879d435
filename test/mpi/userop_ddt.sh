#!/bin/sh
# userop_ddt.sh - test_userop_ddt on 1, 2, 3 and 4 ranks with the component on the
# emulated device: user-defined ops and derived datatypes (gaps) on device buffers.
# Device-buffer calls must be staged: the fast path does not cover user ops
# and derived datatypes.
set -eu
. "$(dirname "$0")/mpi-env.sh"

for np in $TEST_NPS; do
    run_np "$np" "$MPI_TESTDIR/test_userop_ddt" --expect staged
done
echo "PASS: test_userop_ddt on $TEST_NPS ranks"
