#!/bin/sh
# stress.sh - test_stress: random sequences of all six collectives with random
# sizes, roots, in-place forms, delays and clobbered inputs, device buffers
# through the accelerated path; also with host-buffer ranks mixed in, pool
# memory, device-side flags and every non-default algorithm forced.
set -eu
. "$(dirname "$0")/mpi-env.sh"

prog=$MPI_TESTDIR/test_stress
run_np 4 "$prog" 150 0 200 0
run_np 4 "$prog" 150 1 200 1
run_np 3 "$prog" 150 1 100 1
run_mpi 3 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_flags device -- "$prog" 150 1 100 0
run_mpi 3 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_allreduce_algorithm ring \
    --mca coll_gpucoll_bcast_algorithm chain --mca coll_gpucoll_chunk_size 4096 \
    --mca coll_gpucoll_allgather_algorithm ring --mca coll_gpucoll_reduce_scatter_algorithm ring \
    --mca coll_gpucoll_reduce_scatter_block_algorithm ring -- "$prog" 150 1 100 1
echo "PASS: stress"
