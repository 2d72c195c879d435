#!/bin/sh
# intercomm.sh - device buffers on intercommunicators (test_intercomm) at 2, 3
# and 4 ranks: staged (allreduce, bcast, allgather, reduce,
# reduce_scatter(_block), nonblocking forms), never handed to Open MPI's
# coll/inter; host buffers there are delegated.
set -eu
. "$(dirname "$0")/mpi-env.sh"

for np in 2 3 4; do
    run_np "$np" "$MPI_TESTDIR/test_intercomm"
done
echo "PASS: intercomm"
