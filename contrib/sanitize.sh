#!/bin/sh
# contrib/sanitize.sh asan|tsan [BUILDDIR]: a sanitizer job (docs/testing.md,
# "Sanitizers"; docs/sanitizers.md).
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer: every unit test and
#         every MPI integration test (np 1..4, emu), built in _build/asan
#   tsan  ThreadSanitizer: the unit tests (ranks as threads, stream worker
#         threads, the IPC cache), built in _build/tsan
# Both are emu-only builds (configure --enable-sanitizers=...). A sanitizer
# report fails its test. Ends with contrib/test.sh's line
# "N passed, N failed, N skipped"; exits nonzero on failure.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
job=${1:-}
units="test/unit/test_reduce_ops test/unit/test_emu_device test/unit/test_api
test/unit/test_intra test/unit/test_ipc_cache"
case $job in
asan)
    # ASan makes the MPI tests about twice as slow: more time per mpirun
    # before a run counts as a hang.
    GPUCOLL_TEST_TIMEOUT=${GPUCOLL_TEST_TIMEOUT:-300}
    export GPUCOLL_TEST_TIMEOUT
    exec "$top/contrib/test.sh" "${2:-$top/_build/asan}" --enable-sanitizers=address,undefined
    ;;
tsan)
    GPUCOLL_TESTS=$(echo $units)
    export GPUCOLL_TESTS
    # Without UCX: its memory hooks (libucm patches mmap/munmap at load)
    # crash ThreadSanitizer's own interceptors in every test that links the
    # core; the threaded units never use UCX (test_inter runs under ASan).
    exec "$top/contrib/test.sh" "${2:-$top/_build/tsan}" --enable-sanitizers=thread --without-ucx
    ;;
*)
    echo "usage: contrib/sanitize.sh asan|tsan [BUILDDIR]" >&2
    exit 2
    ;;
esac
