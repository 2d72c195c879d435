#!/bin/sh
# fork_child.sh - test_fork_child at np 2 with the component on the test
# device (issue #40, defect 4): children forked after accelerated nonblocking
# calls (every rank has a progress thread) exit normally, gpucoll refuses to
# work in them with one line on stderr each, and the parents keep working.
set -eu
. "$(dirname "$0")/../mpi/mpi-env.sh"

prog=$GPUCOLL_BUILDDIR/test/process/test_fork_child
# progress threads on (auto may choose lazy ones on a small machine)
run_mpi 2 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_progress_thread on \
    -- "$prog"
said=$(grep -c "is a fork of process [0-9]*, which used gpucoll: gpucoll cannot be used here" \
    "$MPI_OUT" || :)
[ "$said" -eq 2 ] ||
    fail "expected one line on stderr from each rank's child that tried gpucoll, found $said"
echo "PASS: test_fork_child"
