#!/bin/sh
# lifetime.sh - test_lifetime: gpucoll's C API before first use, after
# gpucoll_finalize, in a forked child (issue #40, defect 4), and from an
# atexit handler and a destructor function that run after libgpucoll's
# exit-time destruction (defect 1: SIGSEGV in gpucoll_free_device and
# gpucoll_backend). No MPI; the emulated device.
set -eu
: "${GPUCOLL_BUILDDIR:=$(pwd)}"
prog=$GPUCOLL_BUILDDIR/test/process/test_lifetime
rc=0
GPUCOLL_DEVICE=${GPUCOLL_TEST_DEVICE:-emu} timeout -k 5 60 "$prog" || rc=$?
case $rc in
0) echo "PASS: test_lifetime" ;;
124 | 137) echo "FAIL: test_lifetime did not end within 60 s (hang at exit?)" ;;
*) echo "FAIL: test_lifetime ended with status $rc (139 is SIGSEGV)" ;;
esac
exit "$rc"
