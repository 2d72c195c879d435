#!/bin/sh
# contrib/test.sh [BUILDDIR [CONFIGURE-ARGS...]]: set up (dependencies, build)
# and run every test: GoogleTest units and the MPI integration tests (np 1..4,
# emu device buffers). CONFIGURE-ARGS apply when BUILDDIR is configured first
# (contrib/sanitize.sh passes --enable-sanitizers=...).
# GPUCOLL_TESTS="test/unit/test_intra ...": run only these tests;
# GPUCOLL_CHECK_PROGRAMS="test/mpi/test_forms ...": build only these test
# programs (the ones those tests run).
# Ends with a line "N passed, N failed, N skipped"; exits nonzero on failure.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/usage.sh"
help_asked "$0" "${1:-}"
build=${1:-$top/_build/default}
[ $# -gt 0 ] && shift
"$top/contrib/setup.sh" "$build" "$@"
cd "$build"
rc=0
# check_PROGRAMS on the command line: only the programs asked for.
set -- ${GPUCOLL_CHECK_PROGRAMS:+"check_PROGRAMS=$GPUCOLL_CHECK_PROGRAMS"}
make -j"$(nproc)" check TESTS= "$@"   # builds the test programs in parallel, runs none
rm -f test-suite.log
if [ -n "${GPUCOLL_TESTS:-}" ]; then
    make check TESTS="$GPUCOLL_TESTS" "$@" || rc=$?
else
    make check "$@" || rc=$?
fi
[ -f test-suite.log ] || { echo "0 passed, 1 failed (no test-suite.log)"; exit 1; }
count() { sed -n "s/^# $1: *//p" test-suite.log | head -1; }
pass=$(count PASS); fail=$(count FAIL); err=$(count ERROR); skip=$(count SKIP); xpass=$(count XPASS)
failed=$(( ${fail:-0} + ${err:-0} + ${xpass:-0} ))
if [ "$failed" -ne 0 ]; then
    sed -n '/^FAIL\|^ERROR/p' test-suite.log
    # The end of each failed test's own log (a CI page keeps little else).
    for t in $(sed -n 's/^\(FAIL\|ERROR\|XPASS\):* \([^ ]*\).*/\2/p' test-suite.log |
        sed 's/\.sh$//' | sort -u); do
        grep -qs '^:test-result: \(FAIL\|ERROR\|XPASS\)' "$t.trs" || continue
        log=$t.log
        echo "--- last 40 lines of $log"
        tail -n 40 "$log" | sed 's/^/| /'
    done
fi
echo "${pass:-0} passed, $failed failed, ${skip:-0} skipped"
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ]
