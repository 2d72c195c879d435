#!/bin/sh
# robustness.sh - the accelerated path never hangs and never disagrees:
#  1. test_robustness (progress while waiting, host-capable memory kinds in the
#     info key, a failure after posting, then staging or an immediate
#     MPI_Comm_free) at 2 and 3 ranks, host and device flags, with Open MPI's
#     copy-in/out shared memory (no CMA): a large send then needs the
#     sender's progress;
#     memory of unknown range staged (emu, GPUCOLL_EMU_INCOMPLETE_SIZE);
#  2. coll_gpucoll_* parameters that differ between ranks (MPMD): the
#     accelerated path turns itself off and says so; results stay right.
set -eu
. "$(dirname "$0")/mpi-env.sh"

for np in 2 3; do
    run_mpi "$np" --mca coll_gpucoll_device "$TEST_DEVICE" --mca btl_vader_single_copy_mechanism none -- \
        "$MPI_TESTDIR/test_robustness"
done
if [ "$TEST_DEVICE" = emu ]; then
    echo "== device memory of unknown range (a failed driver attribute) is staged"
    run_mpi 2 --mca coll_gpucoll_device emu -x GPUCOLL_EMU_INCOMPLETE_SIZE=4000 -- \
        "$MPI_TESTDIR/test_robustness"
fi
echo "== the same with device-side flags"
run_mpi 3 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_flags device \
    --mca btl_vader_single_copy_mechanism none -- "$MPI_TESTDIR/test_robustness"

echo "== parameters that differ between ranks"
run_mpi 1 --mca coll_gpucoll_device "$TEST_DEVICE" -x OMPI_MCA_coll_gpucoll_chunk_size=4096 -- \
    "$MPI_TESTDIR/test_collectives" --no-large --expect staged : \
    -np 2 "$MPI_TESTDIR/test_collectives" --no-large --expect staged
grep -q 'parameters differ between the ranks' "$MPI_OUT" ||
    fail "no message about the differing parameters"
echo "PASS: robustness"
