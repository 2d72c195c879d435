#!/bin/sh
# gaps.sh - test_gaps: the staged path writes back only the bytes a receive
# datatype covers. Writes into a receive buffer's gaps while a nonblocking or
# persistent call is in flight must survive it (a copy back of the whole span
# reverted them), and a blocking call leaves the gaps as they were. Vector,
# negative lower bound and struct types; allgather (in place too),
# allgatherv, alltoallv, gatherv, allreduce; 1 to 4 ranks on the emulated
# device, with the progress threads off and on; and the number of copies the
# copy back of a column type, a gapless one and one of many pieces take.
set -eu
. "$(dirname "$0")/mpi-env.sh"

for np in $TEST_NPS; do
    for progress in off on; do
        export OMPI_MCA_coll_gpucoll_progress_thread=$progress
        run_np "$np" "$MPI_TESTDIR/test_gaps"
    done
done
# The copy back stays one copy per run of equal blocks: an allgather of two
# matrix columns per rank (a vector resized to one int) is one 2D copy, in
# each of its 6 forms (blocking, nonblocking, persistent; in place or not).
run_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_verbose 10 -- \
    "$MPI_TESTDIR/test_gaps" >/dev/null
one_run=$(grep -c "allgather: buffer 1 copied back as 1 run(s), 128 of its 3104 bytes" "$MPI_OUT" ||
    true)
[ "$one_run" -eq 24 ] ||
    fail "column allgathers copied back as one 2D run in $one_run of 24 calls (4 ranks x 6)"
# A type without gaps that is not contiguous (its pieces out of address
# order) goes back in one copy, not as runs of 4-byte rows; one of a
# thousand small pieces goes back whole (a run per piece would be a copy
# per piece on a GPU).
whole=$(grep -c "allgather: buffer 1 covers its [0-9]* bytes: copied back whole" "$MPI_OUT" || true)
[ "$whole" -ge 4 ] || fail "a gapless type copied back in one piece in $whole calls (expected >= 4)"
many=$(grep -c "allgather: buffer 1 would be [0-9]* runs of [0-9]* bytes on average: the whole span" \
    "$MPI_OUT" || true)
[ "$many" -ge 4 ] || fail "1100 small pieces copied back whole in $many calls (expected >= 4)"
echo "PASS: test_gaps on $TEST_NPS ranks"
