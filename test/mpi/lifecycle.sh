#!/bin/sh
# lifecycle.sh - test_lifecycle on 1, 2, 3 and 4 ranks with the component on
# the emulated device: free/reallocate and communicator dup/split/free loops;
# results checked every iteration; open fds, memfd and /dev/shm mappings and
# /dev/shm entries must not grow. The IPC mapping cache is made small
# (coll_gpucoll_ipc_cache_size 1: the core's floor of 4 entries per rank), so
# that it is full early and eviction runs all the time; a bounded cache then
# cannot be mistaken for a leak, and an unbounded one is caught.
# GPUCOLL_TEST_EXPECT: path of device-buffer calls (default accelerated).
set -eu
. "$(dirname "$0")/mpi-env.sh"

prog=$MPI_TESTDIR/test_lifecycle
for np in $TEST_NPS; do
    run_mpi "$np" --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_ipc_cache_size 1 -- \
        "$prog" --expect "${GPUCOLL_TEST_EXPECT:-accelerated}"
done
# the figure of the intra-node issue: 1000 dup/split/free cycles at 4 ranks
run_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" -- "$prog" --expect accelerated --iterations 1000
# the staged path too (its staging buffers are reused, never leaked)
run_mpi 3 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_allreduce_algorithm staged \
    --mca coll_gpucoll_bcast_algorithm staged --mca coll_gpucoll_allgather_algorithm staged \
    --mca coll_gpucoll_reduce_scatter_algorithm staged \
    --mca coll_gpucoll_reduce_scatter_block_algorithm staged \
    --mca coll_gpucoll_reduce_algorithm staged -- "$prog" --expect staged
echo "PASS: test_lifecycle"
