#!/bin/sh
# contrib/check-docs.sh [BUILDDIR]: checks that README.md and docs/*.md say
# what the code does (CI job "docs"; docs/testing.md). BUILDDIR (default
# _build/default, the normal job's) is set up and built first with
# contrib/setup.sh, a no-op when it is built already. Then
# contrib/check-docs.py checks:
#   - links: every relative link and image of README.md, CHANGELOG.md and
#     docs/*.md names a file of the repository (tracked by git), and every
#     #anchor a heading of the page it points to;
#   - commands: every command of the pages' sh code blocks, and inline code
#     that starts with a project command, is run where that is cheap and
#     safe (ompi_info queries, pkg-config of the build's gpucoll.pc,
#     gpucoll_topo on the repository's fixtures: a "$ gpucoll_topo ..." text
#     block must show exactly what it prints) or else checked: the script or
#     program exists (built programs in BUILDDIR), every option it is given
#     is in its usage (the tool's -h/--help output, or the script's leading
#     comment; contrib/setup.sh and contrib/test.sh hand theirs to
#     configure), the steps, suites and jobs given to contrib/gpu-run.sh,
#     test-series.sh and sanitize.sh are in theirs, mpirun's options are in
#     'mpirun --help all' and every MCA parameter set with --mca or
#     OMPI_MCA_* exists; placeholders (./app, FILE, ...) are skipped;
#   - inline code naming a repository path (src/..., test/..., perf/...)
#     names one that exists (or a program built from one);
#   - MCA parameters: every coll_gpucoll_* the pages name is in
#     'ompi_info --param coll gpucoll --level 9' of the built component, and
#     every parameter there is in docs/tuning.md's tables, with its default
#     and every value it takes;
#   - counts: docs/sanitizers.md's test counts are Makefile.am's, its tsan
#     count contrib/sanitize.sh's; docs/testing.md lists the steps of
#     contrib/gpu-run.sh --help.
# Prints PASS/FAIL/SKIP lines, then "N passed, N failed, N skipped"; exits
# nonzero on any failure. Changes nothing on the machine but what
# contrib/setup.sh installs and builds.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in -h | --help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;/^set -u/d'; exit 0 ;; esac
build=${1:-$top/_build/default}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$top/contrib/setup.sh" "$build" >"$log" 2>&1; then
    tail -30 "$log"
    echo "check-docs: contrib/setup.sh $build failed"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
ompi=$(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p')
cd "$top" || exit 1
python3 contrib/check-docs.py "$build" >"$log" 2>&1
status=$?
cat "$log"
summary=$(tail -1 "$log")
echo "Open MPI ${ompi:-?} (docs): $summary"
echo "$summary"
exit "$status"
