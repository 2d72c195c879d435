#!/bin/sh
# contrib/test-series.sh SUITE: the README's test command (contrib/test.sh:
# GoogleTest units and MPI integration tests) inside a Debian SUITE root
# filesystem with that suite's Open MPI: trixie (Debian 13, Open MPI 5.0),
# testing (Open MPI 6.0). contrib/rootfs.sh makes the root filesystem, or
# reuses it from its cache. The build goes to _build/SUITE in this tree.
# Prints "Open MPI VERSION (SUITE): N passed, N failed, N skipped" and then
# the plain summary line; exits nonzero on failure. Needs root (skips
# otherwise: exit 77, with the reason).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
suite=${1:?usage: contrib/test-series.sh SUITE}
if [ "$(id -u)" -ne 0 ]; then
    echo "test-series: $suite skipped: needs root (debootstrap, chroot)"
    echo "0 passed, 0 failed, 1 skipped"
    exit 77
fi
# Every test, as on 4.1; GPUCOLL_TESTS="test/unit/test_intra ..." runs only these.
log=$top/_build/$suite.log
mkdir -p "$top/_build"
rc=0
"$top/contrib/rootfs.sh" "$suite" /bin/sh -c '
    export GPUCOLL_TEST_TIMEOUT="$1" GPUCOLL_TESTS="$2"
    [ -n "$GPUCOLL_TESTS" ] || unset GPUCOLL_TESTS
    echo "Open MPI: $(ompi_info --parsable 2>/dev/null | sed -n "s/^ompi:version:full://p")"
    cd /src && contrib/test.sh "/src/_build/$3"
' test-series "${GPUCOLL_TEST_TIMEOUT:-}" "${GPUCOLL_TESTS:-}" "$suite" 2>&1 | tee "$log" || :
# tee's status hides the command's: the summary line decides.
version=$(sed -n 's/^Open MPI: //p' "$log" | head -1)
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -1)
if [ -z "$line" ]; then
    echo "Open MPI ${version:-?} ($suite): no summary line (build or setup failed; $log)"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
echo "Open MPI ${version:-?} ($suite): $line"
echo "$line"
case $line in *" 0 failed,"*) ;; *) rc=1 ;; esac
exit $rc
