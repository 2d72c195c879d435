#!/bin/sh
# robustness.sh - the accelerated path never hangs and never disagrees:
#  1. test_robustness (progress while waiting, host-capable memory kinds in the
#     info key, a failure after posting: an error on every rank, then staging
#     or an immediate MPI_Comm_free) at 2, 3 and 4 ranks, host and device
#     flags, direct and chain bcast, with Open MPI's
#     copy-in/out shared memory (no CMA): a large send then needs the
#     sender's progress;
#     memory of unknown range staged (emu, GPUCOLL_EMU_INCOMPLETE_SIZE);
#     buffers that do not fit their allocation refused (MPI_ERR_BUFFER),
#     accelerated (every rank) and staged (the rank with the bad buffer),
#     a staged span that begins below its allocation (negative lower bound)
#     included; a rank that cannot stage (its host allocations fail) takes
#     part on zeros and fails alone, every collective, blocking and nonblocking;
#  2. coll_gpucoll_* parameters that differ between ranks (MPMD): the
#     accelerated path turns itself off and says so; results stay right;
#  3. MPI_THREAD_MULTIPLE: device MPI_Reduce_local in one thread while
#     another runs host collectives on MPI_COMM_SELF (test_threads);
#  4. the GPU chosen after the first collective (MPI_Comm_split_type, then
#     one GPU per rank: emu's GPUCOLL_EMU_DEVICES): the communicator is set
#     up again on the right GPU, the progress thread works there too
#     (test_device_choice).
set -eu
. "$(dirname "$0")/mpi-env.sh"

# Rank 1's copies of 4093 bytes fail when they run (emu fault injection).
inject_rank1='[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export GPUCOLL_EMU_FAIL_COPY_BYTES=4093; exec "$0" "$@"'
for np in 2 3 4; do
    # shellcheck disable=SC2016
    run_mpi "$np" --mca coll_gpucoll_device "$TEST_DEVICE" --mca btl_vader_single_copy_mechanism none -- \
        sh -c "$inject_rank1" "$MPI_TESTDIR/test_robustness" --inject
done
echo "== the same with the chain bcast (the failing rank in the middle of the chain)"
# shellcheck disable=SC2016
run_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_bcast_algorithm chain \
    --mca btl_vader_single_copy_mechanism none -- sh -c "$inject_rank1" "$MPI_TESTDIR/test_robustness" --inject
if [ "$TEST_DEVICE" = emu ]; then
    echo "== a peer that overstates its allocations: every rank fails the call"
    # shellcheck disable=SC2016
    run_mpi 3 --mca coll_gpucoll_device emu -- \
        sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export GPUCOLL_EMU_OVERSTATE_BYTES=65536; exec "$0" "$@"' \
        "$MPI_TESTDIR/test_robustness" --lie
    grep -q 'mapped here' "$MPI_OUT" || fail "no message about the peer's descriptor"
    echo "== buffers that do not fit, on the staged path: the rank with the bad buffer fails"
    run_mpi 3 --mca coll_gpucoll_device emu --mca coll_gpucoll_allreduce_algorithm staged -- \
        "$MPI_TESTDIR/test_robustness" --staged
    echo "== a rank that cannot stage (its host allocations fail) still takes part: no hang"
    all_staged=""
    for c in allreduce bcast allgather reduce_scatter reduce_scatter_block reduce; do
        all_staged="$all_staged --mca coll_gpucoll_${c}_algorithm staged"
    done
    # Then without mappings either (as at vm.max_map_count): the reserve of zeros.
    for nomap in 0 1; do
        # shellcheck disable=SC2016,SC2086 # $all_staged: several words
        run_mpi 3 --mca coll_gpucoll_device emu $all_staged -x GPUCOLL_TEST_STAGING_NOMAP=$nomap -- \
            sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export GPUCOLL_TEST_STAGING_FAIL=1; exec "$0" "$@"' \
            "$MPI_TESTDIR/test_robustness" --stage-fail
        grep -q 'out of host memory staging' "$MPI_OUT" || fail "no message from the rank that cannot stage"
    done
    echo "== device memory of unknown range (a failed driver attribute) is staged"
    run_mpi 2 --mca coll_gpucoll_device emu -x GPUCOLL_EMU_INCOMPLETE_SIZE=4000 -- \
        "$MPI_TESTDIR/test_robustness"
fi
echo "== the same with device-side flags"
# shellcheck disable=SC2016
run_mpi 3 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_flags device \
    --mca btl_vader_single_copy_mechanism none -- sh -c "$inject_rank1" "$MPI_TESTDIR/test_robustness" \
    --inject

echo "== parameters that differ between ranks"
# Rank 0's own value through its environment, not an MPMD launch (a ':'
# between application contexts): the mpirun of Debian's and Ubuntu's Open MPI
# 5.0 (external PRRTE and PMIx) crashes on every MPMD launch, even
# 'mpirun -n 1 true : -n 1 true' (open-mpi/ompi#13303).
# shellcheck disable=SC2016
run_mpi 3 --mca coll_gpucoll_device "$TEST_DEVICE" -- \
    sh -c '[ "$OMPI_COMM_WORLD_RANK" = 0 ] && export OMPI_MCA_coll_gpucoll_chunk_size=4096; exec "$0" "$@"' \
    "$MPI_TESTDIR/test_collectives" --no-large --expect staged
grep -q 'parameters differ between the ranks' "$MPI_OUT" ||
    fail "no message about the differing parameters"
echo "== MPI_THREAD_MULTIPLE: device reduce_local beside host calls on MPI_COMM_SELF"
run_mpi 2 --mca coll_gpucoll_device "$TEST_DEVICE" -- "$MPI_TESTDIR/test_threads"
if [ "$TEST_DEVICE" = emu ]; then
    echo "== the GPU chosen after MPI_Comm_split_type, one per rank (4 emulated GPUs)"
    for pt in 0 1; do
        run_mpi 4 --mca coll_gpucoll_device emu --mca coll_gpucoll_progress_thread "$pt" \
            -x GPUCOLL_EMU_DEVICES=4 -- "$MPI_TESTDIR/test_device_choice"
    done
fi
echo "PASS: robustness"
