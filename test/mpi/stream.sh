#!/bin/sh
# stream.sh - stream-ordered collectives (libgpucoll_mpix, MPICH's MPIX
# stream API; docs/streams.md), test_stream on 1-4 ranks: the enqueue
# returns while the stream is held, produce -> enqueue -> consume with many
# calls in flight for every collective, two stream communicators on two
# streams, refusals with their reason; then a device fault on rank 1's
# stream in the middle of the calls (emu's GPUCOLL_EMU_FAIL_COPY_BYTES):
# every rank learns it, nobody hangs; a communicator across (faked) nodes
# refuses every call with the reason. The emulated device only: its streams
# run their queues on worker threads.
set -eu
. "$(dirname "$0")/mpi-env.sh"

[ "$TEST_DEVICE" = emu ] || skip "the stream tests run on the emulated device (TEST_DEVICE=$TEST_DEVICE)"
prog=$MPI_TESTDIR/test_stream
for np in 1 2 3 4; do
    run_np "$np" "$prog"
    grep -q "PASS: test_stream, $np ranks" "$MPI_OUT" || fail "no PASS line at np $np"
done
echo "== a device fault on rank 1's stream: every rank learns it"
for np in 2 4; do
    # shellcheck disable=SC2016
    run_mpi "$np" --mca coll_gpucoll_device emu -- \
        sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export GPUCOLL_EMU_FAIL_COPY_BYTES=4093; exec "$0" "$@"' \
        "$prog" --fail
    [ "$(grep -c 'learned:' "$MPI_OUT")" = "$np" ] || fail "not every rank learned of the failure"
done
echo "== between nodes (faked, GPUCOLL_HOSTID, 2+2): refused with the reason (not implemented)"
# shellcheck disable=SC2016
run_mpi 4 --mca coll_gpucoll_device emu -- \
    sh -c 'GPUCOLL_HOSTID=node$((OMPI_COMM_WORLD_RANK / 2)); export GPUCOLL_HOSTID; exec "$0" "$@"' \
    "$prog" --between-nodes
grep -q "PASS: test_stream --between-nodes, 4 ranks" "$MPI_OUT" || fail "no PASS line between nodes"
echo "PASS: stream.sh"
