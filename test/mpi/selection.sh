#!/bin/sh
# selection.sh - when coll/gpucoll is selected, and when it is not.
#  1. coll_gpucoll_device=emu: coll_base_verbose shows gpucoll selected and
#     enabled on MPI_COMM_WORLD and MPI_COMM_SELF in every process, above
#     every other component.
#  2. coll_gpucoll_device=auto on a machine without a GPU: gpucoll is not
#     available; host collectives still run correctly, and the counters see
#     no call at all.
#  3. GPUCOLL_DEVICE=emu in the environment alone (no MCA parameter) selects
#     the emulated device for the component and the application.
#  4. Negative control: with --mca coll ^gpucoll, test_collectives --host-only
#     must FAIL (its path checks notice that nothing was intercepted), so a
#     pass of the other tests means that the component did the work.
set -eu
. "$(dirname "$0")/mpi-env.sh"

echo "== 1. coll_gpucoll_device=emu: selected"
for np in 1 3; do
    run_mpi "$np" --mca coll_gpucoll_device emu --mca coll_base_verbose 10 -- \
        sh -c "$STDOUT_APART" "$MPI_TESTDIR/test_host_passthrough"
    gpucoll_selected_on "$np" MPI_COMM_WORLD || fail "gpucoll not selected on MPI_COMM_WORLD (np=$np)"
    gpucoll_selected_on "$np" MPI_COMM_SELF || fail "gpucoll not selected on MPI_COMM_SELF (np=$np)"
done

echo "== 2. coll_gpucoll_device=auto without a GPU: not selected, host collectives correct"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "(a GPU is present: auto may select the component; part 2 skipped)"
else
    run_mpi 3 --mca coll_gpucoll_device auto --mca coll_base_verbose 10 -- \
        sh -c "$STDOUT_APART" "$MPI_TESTDIR/test_host_passthrough"
    if grep -E 'selecting +gpucoll,.*Enabled' "$MPI_OUT"; then
        fail "gpucoll selected with device=auto on a machine without a GPU"
    fi
    grep -q 'coll component gpucoll is not available\|component not available: gpucoll' "$MPI_OUT" ||
        fail "no sign in the verbose output that gpucoll took itself out"
    run_mpi 3 --mca coll_gpucoll_device auto -- "$MPI_TESTDIR/test_collectives" --host-only \
        --no-large --expect-host none
fi

echo "== 3. GPUCOLL_DEVICE=emu alone"
run_mpi 2 -x GPUCOLL_DEVICE=emu -- "$MPI_TESTDIR/test_collectives" --no-large --expect any
run_mpi 2 -x GPUCOLL_DEVICE=emu -- "$MPI_TESTDIR/test_mixed"

echo "== 4. negative control: component off, path checks must fail"
rc=0
MPI_QUIET=1 try_mpi 2 --mca coll '^gpucoll' -- "$MPI_TESTDIR/test_collectives" --host-only \
    --no-large || rc=$?
[ "$rc" -ne 0 ] || { cat "$MPI_OUT"; fail "test_collectives passed without the component: its path checks prove nothing"; }
grep -q 'is coll/gpucoll loaded and selected' "$MPI_OUT" ||
    { cat "$MPI_OUT"; fail "test_collectives failed without the component, but not for the expected reason"; }
echo "(failed as it must, exit status $rc; first lines:)"
grep 'FAIL' "$MPI_OUT" | head -n 2
run_mpi 2 --mca coll '^gpucoll' -- "$MPI_TESTDIR/test_collectives" --host-only --no-large \
    --expect-host none

echo "== 5. MPI 4.1 info key mpi_assert_memory_alloc_kinds: host kinds only skip the agreement"
run_mpi 3 --mca coll_gpucoll_device emu --mca coll_gpucoll_verbose 1 -- \
    "$MPI_TESTDIR/test_info_assert"
# Two communicators: device kinds only (agreement kept), host kinds only (skipped).
n=$(grep -c 'DUP FROM 0 .*accelerated path on, uniform memory asserted' "$MPI_OUT" || true)
[ "$n" -eq 3 ] || fail "the host-only info key did not reach gpucoll on all 3 ranks ($n)"
n=$(grep -c 'DUP FROM 0 .*accelerated path on$' "$MPI_OUT" || true)
[ "$n" -ge 3 ] || fail "the device-only communicator was not set up with the agreement ($n)"
if grep -q 'MPI_COMM_WORLD.*uniform memory asserted' "$MPI_OUT"; then
    fail "MPI_COMM_WORLD took the assertion of another communicator"
fi

echo "PASS: selection"
