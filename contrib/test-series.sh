#!/bin/sh
# contrib/test-series.sh SUITE [asan]: the README's test command
# (contrib/test.sh: GoogleTest units and MPI integration tests) inside a
# Debian SUITE root filesystem with that suite's Open MPI: trixie (Debian 13,
# Open MPI 5.0), testing (Open MPI 6.0). contrib/rootfs.sh makes the root
# filesystem, or reuses it from its cache. The build goes to _build/SUITE in
# this tree.
#   asan: the tests of the requests Open MPI 5.0 and 6.0 write into (a
#   nonblocking call's request must be an ompi_coll_base_nbc_request_t,
#   where Open MPI retains a user-defined op and derived datatypes:
#   userop_ddt, forms) under AddressSanitizer + UBSan, building only their
#   programs, in _build/SUITE-asan (Debian 12's 4.1 runs every test under
#   ASan: contrib/sanitize.sh asan).
# Prints "Open MPI VERSION (SUITE[, ASan]): N passed, N failed, N skipped"
# and then the plain summary line; exits nonzero on failure. Needs root
# (skips otherwise: exit 77, with the reason).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/usage.sh"
need_suite "$0" "${1:-}"
suite=$1
build=$suite label=$suite
configure=
if [ "${2:-}" = asan ]; then
    build=$suite-asan label="$suite, ASan" configure=--enable-sanitizers=address,undefined
    GPUCOLL_TESTS=${GPUCOLL_TESTS-test/mpi/userop_ddt.sh test/mpi/forms.sh}
    GPUCOLL_CHECK_PROGRAMS=${GPUCOLL_CHECK_PROGRAMS-test/mpi/test_userop_ddt test/mpi/test_forms}
    GPUCOLL_TEST_TIMEOUT=${GPUCOLL_TEST_TIMEOUT:-300}  # ASan: about twice as slow
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "test-series: $suite skipped: needs root (debootstrap, chroot)"
    echo "0 passed, 0 failed, 1 skipped"
    exit 77
fi
# Every test, as on 4.1; GPUCOLL_TESTS="test/unit/test_intra ..." runs only these.
log=$top/_build/$build.log
mkdir -p "$top/_build"
rc=0
"$top/contrib/rootfs.sh" "$suite" /bin/sh -c '
    export GPUCOLL_TEST_TIMEOUT="$1" GPUCOLL_TESTS="$2" GPUCOLL_CHECK_PROGRAMS="$4"
    [ -n "$GPUCOLL_TESTS" ] || unset GPUCOLL_TESTS
    [ -n "$GPUCOLL_CHECK_PROGRAMS" ] || unset GPUCOLL_CHECK_PROGRAMS
    echo "Open MPI: $(ompi_info --parsable 2>/dev/null | sed -n "s/^ompi:version:full://p")"
    cd /src && contrib/test.sh "/src/_build/$3" $5
' test-series "${GPUCOLL_TEST_TIMEOUT:-}" "${GPUCOLL_TESTS:-}" "$build" "${GPUCOLL_CHECK_PROGRAMS:-}" \
    "$configure" 2>&1 | tee "$log" || :
# tee's status hides the command's: the summary line decides.
version=$(sed -n 's/^Open MPI: //p' "$log" | head -1)
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -1)
if [ -z "$line" ]; then
    echo "Open MPI ${version:-?} ($label): no summary line (build or setup failed; $log)"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
echo "Open MPI ${version:-?} ($label): $line"
echo "$line"
case $line in *" 0 failed,"*) ;; *) rc=1 ;; esac
exit $rc
