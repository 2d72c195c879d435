#!/bin/sh
# contrib/series-asan.sh SUITE: the tests of the requests Open MPI 5.0 and
# 6.0 write into (issue #35: a nonblocking call's request is an
# ompi_coll_base_nbc_request_t, where Open MPI retains a user-defined op and
# derived datatypes) under AddressSanitizer + UndefinedBehaviorSanitizer,
# inside a Debian SUITE root filesystem (contrib/rootfs.sh): trixie (Open MPI
# 5.0), testing (6.0). Builds the library, the component and only the two
# test programs it runs (test_userop_ddt, test_forms) in _build/SUITE-asan.
# Debian 12's 4.1 runs every test under ASan in contrib/sanitize.sh asan.
# Prints "Open MPI VERSION (SUITE, ASan): N passed, N failed, N skipped" and
# the plain summary line; exits nonzero on failure. Needs root (skips
# otherwise: exit 77).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
suite=${1:?usage: contrib/series-asan.sh SUITE}
if [ "$(id -u)" -ne 0 ]; then
    echo "series-asan: $suite skipped: needs root (debootstrap, chroot)"
    echo "0 passed, 0 failed, 1 skipped"
    exit 77
fi
log=$top/_build/$suite-asan.log
mkdir -p "$top/_build"
"$top/contrib/rootfs.sh" "$suite" /bin/sh -c '
    b=/src/_build/$1-asan
    echo "Open MPI: $(ompi_info --parsable 2>/dev/null | sed -n "s/^ompi:version:full://p")"
    if ! /src/contrib/setup.sh "$b" --enable-sanitizers=address,undefined >"$b.setup.log" 2>&1; then
        tail -n 30 "$b.setup.log"
        echo "0 passed, 1 failed, 0 skipped"
        exit 1
    fi
    cd "$b" || exit 1
    rm -f test-suite.log
    # Only the programs the two scripts run (check_PROGRAMS on the command line).
    GPUCOLL_TEST_TIMEOUT=300 make -j2 check check_PROGRAMS="test/mpi/test_userop_ddt test/mpi/test_forms" \
        TESTS="test/mpi/userop_ddt.sh test/mpi/forms.sh" >"$b.check.log" 2>&1
    count() { sed -n "s/^# $1: *//p" test-suite.log 2>/dev/null | head -1; }
    pass=$(count PASS); fail=$(count FAIL); err=$(count ERROR)
    failed=$(( ${fail:-0} + ${err:-0} ))
    [ -f test-suite.log ] || failed=1
    [ "$failed" -eq 0 ] || tail -n 40 "$b.check.log"
    echo "${pass:-0} passed, $failed failed, 0 skipped"
' series-asan "$suite" 2>&1 | tee "$log" || :
version=$(sed -n 's/^Open MPI: //p' "$log" | head -1)
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -1)
[ -n "$line" ] || line="0 passed, 1 failed, 0 skipped"
echo "Open MPI ${version:-?} ($suite, ASan): $line"
echo "$line"
case $line in *" 0 failed,"*) exit 0 ;; *) exit 1 ;; esac
