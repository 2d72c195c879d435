#!/bin/sh
# bigcount.sh - test_bigcount: MPI_Allreduce_c and MPI_Bcast_c of 2^31 + 37
# elements on device buffers (emu), 2 ranks, accelerated; about 2 GiB of
# emulated device memory per rank. Skips where the MPI has no large-count
# calls (Open MPI 4.1 and 5.0) or the machine lacks the memory.
set -eu
. "$(dirname "$0")/mpi-env.sh"

prog=$MPI_TESTDIR/test_bigcount
run_np 1 "$prog" --count 1000
grep -q "no large-count calls" "$MPI_OUT" && skip "this MPI has no large-count (MPI_*_c) calls"
# 2 ranks x 2 GiB of shared memory, plus the kernel's own: ask for 6 GiB.
avail_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
shm_kb=$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')
[ "${avail_kb:-0}" -ge 6291456 ] && [ "${shm_kb:-0}" -ge 4718592 ] ||
    skip "needs 6 GiB of free memory and 4.5 GiB in /dev/shm (have ${avail_kb:-?} kB, ${shm_kb:-?} kB)"
GPUCOLL_TEST_TIMEOUT=600
run_np 2 "$prog"
echo "PASS: test_bigcount"
