#!/bin/sh
# collectives.sh - test_collectives (every collective x type x op x count x
# in-place form x root x offset, device and host buffers) with the component
# on the emulated device:
#  1. default algorithm selection on 1, 2, 3 and 4 ranks: device calls take
#     the accelerated path (GPUCOLL_TEST_EXPECT overrides: staged|accelerated|
#     any; GPUCOLL_TEST_ALGORITHM: expected last_algorithm, [COLL=]NAME);
#  2. every collective forced onto the staged path (1, 2, 3 and 4 ranks);
#  3. every accelerated algorithm forced, in two sets (3 and 4 ranks), each
#     call checked for the algorithm it ran;
#  4. device buffers of even ranks from a pool IPC cannot export: the
#     accelerated path through exportable copies (2 and 3 ranks);
#  5. device-side flags (coll_gpucoll_flags device), default and forced
#     algorithms (2 and 3 ranks);
#  6. coll_gpucoll_flags auto (the default): host flags where ranks share a
#     GPU, device flags with one (emulated) GPU per rank (GPUCOLL_EMU_GPU);
#  7. host flags pipelined on a stream (coll_gpucoll_host_pipeline on; the
#     cuda default, off by default on emu), default and forced algorithms.
set -eu
. "$(dirname "$0")/mpi-env.sh"

prog=$MPI_TESTDIR/test_collectives
mca_all() { # mca_all ALGO...: one per collective, in order
    _s=""
    for _c in allreduce bcast allgather reduce_scatter reduce_scatter_block reduce; do
        _s="$_s --mca coll_gpucoll_${_c}_algorithm $1"
        [ $# -gt 1 ] && shift
    done
    echo "$_s"
}

echo "== 1. default selection"
for np in $TEST_NPS; do
    run_np "$np" "$prog" --expect "${GPUCOLL_TEST_EXPECT:-accelerated}" \
        ${GPUCOLL_TEST_ALGORITHM:+--algorithm "$GPUCOLL_TEST_ALGORITHM"}
done

echo "== 2. staged path forced"
for np in $TEST_NPS; do
    # shellcheck disable=SC2046 # words
    run_mpi "$np" --mca coll_gpucoll_device "$TEST_DEVICE" $(mca_all staged) -- "$prog" --expect staged
done

echo "== 3. algorithms forced"
set1="two_shot chain ring ring ring direct"
set2="ring direct direct direct direct direct"
for set in "$set1" "$set2"; do
    # shellcheck disable=SC2086
    set -- $set
    checks="--algorithm allreduce=$1 --algorithm bcast=$2 --algorithm allgather=$3"
    checks="$checks --algorithm reduce_scatter=$4 --algorithm reduce_scatter_block=$5"
    checks="$checks --algorithm reduce=$6"
    for np in 3 4; do
        # shellcheck disable=SC2046,SC2086
        run_mpi "$np" --mca coll_gpucoll_device "$TEST_DEVICE" $(mca_all $set) -- "$prog" \
            --expect accelerated $checks
    done
done
echo "== 4. pool memory (IPC cannot export it) on even ranks: still accelerated"
for np in 2 3; do
    run_np "$np" "$prog" --expect accelerated --pool-memory
done
echo "== 5. device-side flags: every step stream-ordered on the device"
run_mpi 2 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_flags device -- "$prog" --no-large \
    --expect accelerated
# shellcheck disable=SC2046
run_mpi 3 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_flags device \
    $(mca_all two_shot chain ring ring ring direct) -- "$prog" --no-large --expect accelerated
if [ "$TEST_DEVICE" = emu ]; then
    echo "== 6. flags auto: host flags on a shared GPU, device flags with one GPU per rank"
    run_mpi 3 --mca coll_gpucoll_device emu --mca coll_gpucoll_verbose 1 -- "$prog" --no-large \
        --expect accelerated
    n=$(grep -c 'host flags (ranks share a GPU)' "$MPI_OUT" || true)
    [ "$n" -ge 3 ] || { echo "FAIL: shared GPU: 'host flags' in $n of 3 ranks"; exit 1; }
    # shellcheck disable=SC2016 # expanded by each rank's shell
    run_mpi 3 --mca coll_gpucoll_device emu --mca coll_gpucoll_verbose 1 -- \
        sh -c 'GPUCOLL_EMU_GPU=$OMPI_COMM_WORLD_LOCAL_RANK exec "$0" "$@"' "$prog" --no-large \
        --expect accelerated
    n=$(grep -c 'device flags (one GPU per rank)' "$MPI_OUT" || true)
    [ "$n" -ge 3 ] || { echo "FAIL: one GPU per rank: 'device flags' in $n of 3 ranks"; exit 1; }
fi
echo "== 7. host flags pipelined on a stream"
for np in 2 4; do
    run_mpi "$np" --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_flags host \
        --mca coll_gpucoll_host_pipeline on -- "$prog" --expect accelerated
done
# shellcheck disable=SC2046
run_mpi 3 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_flags host \
    --mca coll_gpucoll_host_pipeline on --mca coll_gpucoll_chunk_size 4096 \
    $(mca_all two_shot chain ring ring ring direct) -- "$prog" --expect accelerated
echo "PASS: test_collectives"
