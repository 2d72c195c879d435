#!/bin/sh
# internode.sh - the path between nodes, with nodes faked on this machine
# (GPUCOLL_HOSTID per rank, as NCCL_HOSTID does for NCCL):
#  1. test_internode (results, composition, bytes sent between nodes against
#     the bound) on 2x2, 4x1, 2x1, 2+1+1, 2x4 and 3+3+2 ranks per node, over UCX's tcp
#     loopback and over UCX's default transports;
#  2. test_collectives (every collective x type x op x count x in place x
#     root x mixed memory kinds) on 2x2, 4x1, 2x1 and 2+1+1 over tcp, and 2x2
#     and 2+1+1 over UCX's defaults: every device call takes the path between
#     nodes (checked call by call with its algorithm);
#  3. test_mixed (host and device buffers mixed across ranks and nodes);
#  4. an injected failure on rank 1 (2x2, 4x1, 2+1+1): every rank of its
#     node fails that call, nobody hangs, later calls are staged and right;
#  5. rank 1 killed before a call the others are in (2x2): mpirun ends the
#     job within 30 s and nothing is left in /dev/shm;
#  6. a UCX that cannot start (UCX_TLS=rc, no InfiniBand here): every device
#     call is staged, correct, and one verbose line per rank says why;
#  7. nodes that cannot reach each other (one fake node's UCX on tcp, the
#     other's on shared memory only): staged, correct, no hang, said why;
#  8. test_forms between nodes: nonblocking and persistent calls of the
#     accelerated set take the path between nodes (the progress threads
#     exchange the nodes' verdicts), an MPI_Iallreduce ends while no rank is
#     inside MPI, calls on two communicators started in opposite orders;
#     every other collective staged; with the threads off, staged.
#  9. a late rank: the others say whom they wait for, and the call completes;
# 10. a broken coll_gpucoll_uniform_memory promise: a hang, but a told one;
# 11. the MPI 4.1 info key mpi_assert_memory_alloc_kinds between nodes (#6
#     item 5): a rank that passes host memory on a device-only communicator,
#     or device memory on a host-only one, gets a correct result, and nobody
#     hangs;
# 12. coll_gpucoll_uniform_memory kept (device memory everywhere) but a bcast
#     whose root's strided datatype makes it ineligible there, blocking,
#     nonblocking and persistent: staged everywhere, correct, no hang.
# 13. the GPU chosen after MPI_Comm_split_type, one per rank (emu, 4
#     emulated GPUs; 2x2 and 2+1+1): every node sets the communicator up
#     again on the right GPU and the calls are accelerated and right;
#     with the NIC of each GPU given, the UCX context of a rank set up again
#     is on its GPU's NIC (rails after the choice).
# 14. coll_gpucoll_inter_chunk_size near 2^62 (a bcast chain across three
#     nodes divided by zero): bounded to 64 MiB with a message, results right.
# Skipped when gpucoll was built without UCX.
set -eu
. "$(dirname "$0")/mpi-env.sh"

grep -q '^#define GPUCOLL_HAVE_UCX 1' "$GPUCOLL_BUILDDIR/config.h" ||
    skip "gpucoll was built without UCX"

tcp="-x UCX_TLS=tcp,self -x UCX_NET_DEVICES=lo"
# fake SHAPE: a wrapper that puts the ranks on nodes of SHAPE's sizes in
# rank order ("2 1 1": ranks 0-1 on fake0, 2 on fake1, 3 on fake2). With
# INJECT set, rank 1's copies of 4093 bytes fail.
fake() {
    echo 'r=$OMPI_COMM_WORLD_RANK; n=0; for c in '"$1"'; do [ "$r" -lt "$c" ] && break;
        r=$((r - c)); n=$((n + 1)); done; export GPUCOLL_HOSTID=fake$n;
        [ -n "${INJECT:-}" ] && [ "$OMPI_COMM_WORLD_RANK" = 1 ] &&
        export GPUCOLL_EMU_FAIL_COPY_BYTES=4093; exec "$0" "$@"'
}
np_of() { _t=0; for _c in $1; do _t=$((_t + _c)); done; echo "$_t"; }

echo "== 1. test_internode: shapes x transports"
for shape in "2 2" "1 1 1 1" "1 1" "2 1 1" "4 4" "3 3 2"; do
    for tls in "$tcp" ""; do
        # shellcheck disable=SC2086 # words
        run_mpi "$(np_of "$shape")" --mca coll_gpucoll_device "$TEST_DEVICE" $tls -- \
            sh -c "$(fake "$shape")" "$MPI_TESTDIR/test_internode"
    done
done

echo "== 2. test_collectives between nodes"
for run in "2 2|$tcp" "1 1 1 1|$tcp" "1 1|$tcp" "2 1 1|$tcp" "2 2|" "2 1 1|"; do
    shape=${run%%|*} tls=${run#*|}
    allreduce=hier
    [ "$shape" = "2 1 1" ] && allreduce=leader
    # shellcheck disable=SC2086 # words
    run_mpi "$(np_of "$shape")" --mca coll_gpucoll_device "$TEST_DEVICE" $tls -- \
        sh -c "$(fake "$shape")" "$MPI_TESTDIR/test_collectives" --no-large --expect accelerated \
        --algorithm allreduce=$allreduce --algorithm bcast=hier --algorithm allgather=leader \
        --algorithm reduce=leader --algorithm reduce_scatter=leader \
        --algorithm reduce_scatter_block=leader
done

echo "== 3. test_mixed between nodes"
# shellcheck disable=SC2086 # words
run_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" $tcp -- sh -c "$(fake "2 2")" \
    "$MPI_TESTDIR/test_mixed" --expect any

echo "== 4. injected failure (emu only: the fault injection is the emu backend's)"
[ "$TEST_DEVICE" = emu ] || echo "skipped on $TEST_DEVICE"
for shape in "2 2" "1 1 1 1" "2 1 1"; do
    [ "$TEST_DEVICE" = emu ] || break
    # shellcheck disable=SC2086 # words
    INJECT=1 run_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" $tcp -x INJECT -- \
        sh -c "$(fake "$shape")" "$MPI_TESTDIR/test_internode" --inject
done
# The same failure in a nonblocking call, run by the progress thread (on) or
# inside MPI_Wait (auto: lazy on a small machine).
for run in "2 2|on" "2 1 1|auto"; do
    [ "$TEST_DEVICE" = emu ] || break
    shape=${run%%|*} threads=${run#*|}
    # shellcheck disable=SC2086 # words
    INJECT=1 run_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" $tcp -x INJECT \
        --mca coll_gpucoll_progress_thread "$threads" -- \
        sh -c "$(fake "$shape")" "$MPI_TESTDIR/test_internode" --inject --nonblocking
done

echo "== 5. a rank killed in the middle"
# Open MPI's own shared memory (vader) goes to a folder of this test, so that
# other jobs on the machine do not disturb the /dev/shm check; gpucoll's
# segments are memfds and must never appear there.
mkdir -p "$MPI_TMP/vader"
ls /dev/shm | sort >"$MPI_TMP/shm"
start=$(date +%s)
rc=0
# shellcheck disable=SC2086 # words
GPUCOLL_TEST_TIMEOUT=60 MPI_QUIET=1 try_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" $tcp \
    --mca btl_vader_backing_directory "$MPI_TMP/vader" -- \
    sh -c "$(fake "2 2")" "$MPI_TESTDIR/test_internode" --kill || rc=$?
took=$(($(date +%s) - start))
echo "mpirun ended with status $rc after ${took}s (137: rank 1's SIGKILL, as mpirun reports it)"
[ "$rc" -ne 0 ] || fail "the job survived the death of rank 1"
[ "$took" -le 30 ] || fail "the job took ${took}s to end after rank 1 died (limit 30s)"
sleep 1
left=$(ls /dev/shm | sort | comm -13 "$MPI_TMP/shm" - | grep -i gpucoll || true)
[ -z "$left" ] || fail "left in /dev/shm after the killed job: $left"
echo "Open MPI's own files left by the killed job: $(ls "$MPI_TMP/vader" | wc -l) (not gpucoll's)"
echo "== 6. UCX unusable: staged, with the reason"
# shellcheck disable=SC2046 # words
run_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_verbose 1 -x UCX_TLS=rc -- \
    sh -c "$(fake "2 2")" "$MPI_TESTDIR/test_collectives" --no-large --expect staged
n=$(grep -c 'accelerated path off between nodes (staged): UCX ucp_init failed' "$MPI_OUT" || true)
[ "$n" -ge 4 ] || fail "expected a line per rank saying why the path between nodes is off ($n)"
echo "== 7. nodes that cannot reach each other: staged, with the reason"
run_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" --mca coll_gpucoll_verbose 1 -- \
    sh -c '[ "$OMPI_COMM_WORLD_RANK" -ge 2 ] && UCX_TLS=sm,self || UCX_TLS=tcp,self;
        export UCX_TLS UCX_NET_DEVICES=lo; exec "$0" "$@"' \
    sh -c "$(fake "2 2")" "$MPI_TESTDIR/test_mixed" --expect staged
n=$(grep -c 'accelerated path off between nodes (staged): reaching the other nodes' "$MPI_OUT" || true)
[ "$n" -ge 4 ] || fail "expected a line per rank saying the nodes cannot reach each other ($n)"
echo "== 8. nonblocking and persistent calls between nodes (test_forms)"
for run in "2 2|on|" "2 1 1|auto|--quick" "1 1 1 1|on|--quick" "2 2|off|--quick"; do
    shape=${run%%|*} rest=${run#*|}
    threads=${rest%%|*} quick=${rest#*|}
    # shellcheck disable=SC2086 # words
    run_mpi "$(np_of "$shape")" --mca coll_gpucoll_device "$TEST_DEVICE" $tcp \
        --mca coll_gpucoll_progress_thread "$threads" -- \
        sh -c "$(fake "$shape")" "$MPI_TESTDIR/test_forms" --between-nodes $quick
done
echo "== 9. a late rank: the others wait, and say whom they wait for"
# Ranks 0-2 wait ~6 s for rank 3 (fake1, not its first rank): rank 2 for
# its node-mate, the other node for rank 2's or rank 3's word.
# shellcheck disable=SC2086 # words
run_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" $tcp --mca coll_gpucoll_wait_warning 1 -- \
    sh -c "$(fake "2 2")" "$MPI_TESTDIR/test_internode" --late 6
grep -q 'has waited 1 s for rank 3 (this node) to enter call' "$MPI_OUT" ||
    fail "rank 2 did not say that it waits for rank 3"
grep -q 'has waited 1 s for rank [23] on another node' "$MPI_OUT" ||
    fail "no rank of the other node said that it waits for fake1"
if grep -q 'uniform_memory set' "$MPI_OUT"; then fail "the uniform-memory hint without the assertion"; fi
echo "== 10. a broken uniform-memory assertion: a hang, but a told one"
# Rank 0 passes host memory with coll_gpucoll_uniform_memory: its call skips
# gpucoll, the others wait for it for ever (the documented risk of the
# assertion between nodes). They must say so; the run is cut after a fifth
# of the test timeout (60 s under ASan), at least 20 s.
cut=$((GPUCOLL_TEST_TIMEOUT / 5))
[ "$cut" -ge 20 ] || cut=20
# shellcheck disable=SC2086 # words
GPUCOLL_TEST_TIMEOUT=$cut try_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" $tcp \
    --mca coll_gpucoll_uniform_memory 1 --mca coll_gpucoll_wait_warning 2 -- \
    sh -c "$(fake "2 2")" "$MPI_TESTDIR/test_internode" --mixed-only || rc=$?
grep -q 'has waited 2 s for rank 0 (this node) to enter call.*uniform_memory set, a rank that passed host memory' "$MPI_OUT" ||
    fail "rank 1 did not say that it waits for rank 0, nor why that may last for ever"
grep -q 'has waited 2 s for rank 0 on another node.*uniform_memory set' "$MPI_OUT" ||
    fail "the other node did not say that it waits for rank 0"
echo "== 11. memory-kind assertions broken between nodes: correct, no hang"
for shape in "2 2" "2 1 1"; do
    # shellcheck disable=SC2086 # words
    run_mpi "$(np_of "$shape")" --mca coll_gpucoll_device "$TEST_DEVICE" $tcp -- \
        sh -c "$(fake "$shape")" "$MPI_TESTDIR/test_info_assert"
done

echo "== 12. uniform memory, a root whose datatype is staged: every form staged, no hang"
# shellcheck disable=SC2086 # words
run_mpi 4 --mca coll_gpucoll_device "$TEST_DEVICE" $tcp --mca coll_gpucoll_uniform_memory 1 \
    --mca coll_gpucoll_progress_thread on -- \
    sh -c "$(fake "2 2")" "$MPI_TESTDIR/test_internode" --uneven-types

if [ "$TEST_DEVICE" = emu ]; then
    echo "== 13. the GPU chosen after the first collective, between nodes"
    for shape in "2 2" "2 1 1"; do
        # shellcheck disable=SC2086 # words
        run_mpi 4 --mca coll_gpucoll_device emu $tcp --mca coll_gpucoll_progress_thread on \
            -x GPUCOLL_EMU_DEVICES=4 -- sh -c "$(fake "$shape")" "$MPI_TESTDIR/test_device_choice"
    done
    echo "== 13b. rails after the choice: set up again on its GPU, a rank's UCX is on its GPU's NIC"
    # The NIC of each GPU given (coll_gpucoll_rail_devices; emu GPUs have no
    # PCI bus id to discover one from). Set up before the choice: UCX's
    # choice (no NIC named); set up again on the GPU: that GPU's NIC. Before,
    # the first transport was the process's for good.
    run_mpi 4 --mca coll_gpucoll_device emu -x UCX_TLS=tcp,self --mca coll_gpucoll_verbose 1 \
        --mca coll_gpucoll_rail_devices lo -x GPUCOLL_EMU_DEVICES=4 -- \
        sh -c "$(fake "2 2")" "$MPI_TESTDIR/test_device_choice"
    before=$(grep 'between nodes: ' "$MPI_OUT" | grep -vc 'network device' || true)
    after=$(grep -c 'between nodes: .*, network device lo' "$MPI_OUT" || true)
    [ "$before" -ge 4 ] && [ "$after" -ge 4 ] ||
        fail "expected each rank set up on UCX's NIC, then on its GPU's (lo): $before, $after lines"
fi

echo "== 14. an absurd coll_gpucoll_inter_chunk_size: bounded, said once per process"
# shellcheck disable=SC2086 # words
run_mpi 3 --mca coll_gpucoll_device "$TEST_DEVICE" $tcp \
    --mca coll_gpucoll_inter_chunk_size 4611686018427387904 --mca coll_gpucoll_inter_bcast chain -- \
    sh -c "$(fake "1 1 1")" "$MPI_TESTDIR/test_internode"
n=$(grep -c 'coll_gpucoll_inter_chunk_size=4611686018427387904 is outside 4096..67108864 bytes; using 67108864' "$MPI_OUT" || true)
[ "$n" -eq 3 ] || fail "expected one message per process about the bounded chunk ($n)"

echo "PASS: internode"
