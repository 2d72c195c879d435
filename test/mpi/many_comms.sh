#!/bin/sh
# many_comms.sh - 10,000 live communicators of 4 ranks, a device allreduce
# on each (emu), with coll_gpucoll_max_comms at its default (256): the world
# and the first 255 duplicates accelerated, the rest staged, nothing left
# behind when they are freed; prints what each costs (issue #40, defect 3).
# Without the bound the same run exhausts vm.max_map_count (65530) after
# about 5,000 communicators and takes minutes.
set -eu
. "$(dirname "$0")/mpi-env.sh"

run_np 4 "$MPI_TESTDIR/test_many_comms" --comms 10000 --bound 256
grep -q "accelerated path off for this communicator" "$MPI_OUT" ||
    fail "no line about the communicators beyond the bound"
echo "PASS: test_many_comms"
