#!/bin/sh
# memory_bound.sh - freed device buffers do not stay resident in peers: a loop
# of "allocate 128 MiB, allreduce, free" at 4 ranks (30 iterations, buffers
# often at new addresses) keeps the node's Shmem below the live set + 4 x the
# IPC cache's byte bound (coll_gpucoll_ipc_cache_bytes, 128 MiB here) + 256
# MiB, and every result right. emu only (its device memory is shared memory).
set -eu
. "$(dirname "$0")/mpi-env.sh"

if [ "$TEST_DEVICE" != emu ]; then
    echo "SKIP: needs the emu device (Shmem shows its memory)"
    exit 77
fi
run_mpi 4 --mca coll_gpucoll_device emu --mca coll_gpucoll_ipc_cache_bytes 134217728 -- \
    "$MPI_TESTDIR/test_memory_bound" --iterations 30 --mib 128 --bound-mib 128
echo "PASS: memory_bound"
