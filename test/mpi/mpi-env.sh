# mpi-env.sh - sourced by every test/mpi/*.sh script.
#
# Environment (set by `make check`; defaults for running a script by hand
# from the build directory):
#   GPUCOLL_BUILDDIR  build tree (coll/.libs/mca_coll_gpucoll.so, src/.libs, test/mpi/)
#   GPUCOLL_SRCDIR    source tree
#   MPIRUN            mpirun command (may carry options)
#   GPUCOLL_TEST_TIMEOUT  seconds allowed per mpirun (default 120)
#
# Provides:
#   run_mpi NP [mpirun options...] -- PROG [ARGS...]
#       runs PROG on NP ranks with the given extra mpirun options, under a
#       timeout; prints the command and its output; on failure prints
#       "FAILED" with the exit status and exits the script with 1.
#       The output of the last run is in $MPI_OUT (a file).
#   run_np NP PROG [ARGS...]
#       run_mpi with the component on the test device
#       (--mca coll_gpucoll_device $TEST_DEVICE: emu, or GPUCOLL_TEST_DEVICE).
#   try_mpi NP [mpirun options...] -- PROG [ARGS...]
#       like run_mpi but returns the exit status instead of failing
#       (MPI_QUIET=1: does not print the output).
#   gpucoll_selected_on NP COMM
#       after a run with --mca coll_base_verbose 10: gpucoll was selected
#       on COMM in all NP processes. Run the program as
#       sh -c "$STDOUT_APART" PROG ARGS there.
#   skip MESSAGE / fail MESSAGE
#   $MPI_TESTDIR (the test programs), $MPI_TMP (a scratch directory removed
#   at exit), $COMPONENT_DIR (holds the component alone), $TEST_NPS (rank
#   counts to run, default "1 2 3 4", from GPUCOLL_TEST_NPS).

: "${GPUCOLL_BUILDDIR:=$(pwd)}"
: "${GPUCOLL_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${MPIRUN:=mpirun}"
: "${GPUCOLL_TEST_TIMEOUT:=120}"
# shellcheck disable=SC2034 # used by the scripts that source this file
TEST_NPS=${GPUCOLL_TEST_NPS:-1 2 3 4}
# The device backend of the tests: emu here; contrib/gpu-run.sh sets cuda.
TEST_DEVICE=${GPUCOLL_TEST_DEVICE:-emu}
export GPUCOLL_BUILDDIR GPUCOLL_SRCDIR

skip() {
    echo "SKIP: $*"
    exit 77
}
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# The only reason to skip: no MPI launcher.
command -v "${MPIRUN%% *}" >/dev/null 2>&1 || skip "${MPIRUN%% *} not found"

# shellcheck disable=SC2034
MPI_TESTDIR=$GPUCOLL_BUILDDIR/test/mpi
COMPONENT_SO=$GPUCOLL_BUILDDIR/coll/.libs/mca_coll_gpucoll.so
[ -f "$COMPONENT_SO" ] ||
    fail "component not built: $COMPONENT_SO (GPUCOLL_BUILDDIR=$GPUCOLL_BUILDDIR)"

MPI_TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpucoll-mpitest.XXXXXX")
trap 'rm -rf "$MPI_TMP"' EXIT
MPI_OUT=$MPI_TMP/output
# A directory with the component alone: Open MPI tries to open every
# mca_coll_* file of a component directory, and coll/.libs also holds the
# component's mca_coll_gpucoll_la-*.o objects ("unable to open ...").
COMPONENT_DIR=$MPI_TMP/components
mkdir "$COMPONENT_DIR"
ln -s "$COMPONENT_SO" "$COMPONENT_DIR/mca_coll_gpucoll.so"

# Keep SYS_DEFAULT and USER_DEFAULT: without them Open MPI loses its own
# components (even mpirun's options break).
export OMPI_MCA_mca_base_component_path="$COMPONENT_DIR:SYS_DEFAULT:USER_DEFAULT"
export LD_LIBRARY_PATH="$GPUCOLL_BUILDDIR/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# More ranks than cores: yield instead of spinning, do not bind.
export OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_hwloc_base_binding_policy=none
# The same for Open MPI 5.0 and 6.0, whose mpirun is PRRTE's: it reads its
# own names (the OMPI_MCA_ ones above reach only the MPI processes there).
# 6.0's PRRTE calls the mapping policy "mapby" (and warns at the old name,
# which 5.0's knows alone).
case $(${MPIRUN%% *} --version 2>/dev/null | head -1) in
*" 4."*) ;;
*" 5."*) export PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe ;;
*) export PRTE_MCA_mapby=:oversubscribe ;;
esac
export PRTE_MCA_hwloc_default_binding_policy=none
# PMIx (5.0, 6.0) reads OMPI_MCA_mca_base_component_path too, and knows no
# SYS_DEFAULT: give it its own directory.
_pmixlib=$(pkg-config --variable=libdir pmix 2>/dev/null || :)
[ -n "$_pmixlib" ] && [ -d "$_pmixlib/pmix" ] &&
    export PMIX_MCA_mca_base_component_path="$_pmixlib/pmix"
# Sanitizer builds (test/sanitizers/env.sh set the options): Open MPI 4.1.4
# dlcloses its components at MPI_Finalize, and LeakSanitizer then reports
# some 3300 of Open MPI's own allocations per process from "<unknown
# module>"s that no suppression can name (Debian's build has no
# mca_base_component_disable_dlclose). Leaks are checked by the unit tests,
# which run the core without MPI; here ASan and UBSan check every access.
case ",${GPUCOLL_SANITIZERS:-}," in
*,address,*) export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" ;;
esac
# The preload that programs not built here (ompi_info) need to load the
# instrumented component (empty without sanitizers).
SAN_PRELOAD=${GPUCOLL_SAN_PRELOAD:-}
# The scripts choose the backend and the component's parameters explicitly:
# a stray setting from the caller's environment (a different device for the
# application and the component, a forced algorithm) would change the tests.
unset GPUCOLL_DEVICE OMPI_MCA_coll
for _v in $(env | sed -n 's/^\(OMPI_MCA_coll_gpucoll_[A-Za-z0-9_]*\)=.*/\1/p'); do
    unset "$_v"
done
# The tests check the size thresholds: no built-in measured selection table
# (cuda has one for ranks sharing a GPU; measured_selection.sh tests tables).
export OMPI_MCA_coll_gpucoll_selection_file=none

# try_mpi NP [mpirun options...] -- PROG [ARGS...]
try_mpi() {
    _np=$1
    shift
    _opts=""
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        _opts="$_opts $1"
        shift
    done
    [ $# -gt 0 ] || fail "try_mpi: missing -- before the program"
    shift
    echo "+ timeout $GPUCOLL_TEST_TIMEOUT $MPIRUN -np $_np$_opts $*"
    _rc=0
    # shellcheck disable=SC2086 # options are words
    timeout -k 10 "$GPUCOLL_TEST_TIMEOUT" $MPIRUN -np "$_np" $_opts "$@" >"$MPI_OUT" 2>&1 || _rc=$?
    [ "${MPI_QUIET:-0}" = 1 ] || cat "$MPI_OUT"
    if [ "$_rc" -eq 124 ] || [ "$_rc" -eq 137 ]; then
        echo "TIMEOUT: no result after $GPUCOLL_TEST_TIMEOUT s (hang?)"
    fi
    return "$_rc"
}

# run_mpi NP [mpirun options...] -- PROG [ARGS...]
run_mpi() {
    _rrc=0
    try_mpi "$@" || _rrc=$?
    if [ "$_rrc" -ne 0 ]; then
        echo "FAILED (exit status $_rrc): $MPIRUN -np $*" >&2
        exit 1
    fi
}

# run_np NP PROG [ARGS...]: the component on the test device.
run_np() {
    _n=$1
    shift
    run_mpi "$_n" --mca coll_gpucoll_device "$TEST_DEVICE" -- "$@"
}

# sh -c "$STDOUT_APART" PROG [ARGS...]: runs PROG with its standard output
# in $MPI_TMP/stdout.RANK, out of the run's output. For runs whose stderr
# (coll_base_verbose) is parsed: Open MPI 5.0's mpirun (PRRTE) can place a
# piece of a process's stderr line in the middle of its stdout in the
# output file, about 1 run in 25 at np 1 ("selecting     gpucoll,allreduce
# int n=0 ok" ... " priority  95, Enabled" 70 lines further down).
# shellcheck disable=SC2016 # expanded by the ranks' shell
STDOUT_APART='exec "$0" "$@" >"'"$MPI_TMP"'/stdout.$OMPI_COMM_WORLD_RANK"'

# gpucoll_selected_on NP COMM: in the last run's output (with
# --mca coll_base_verbose 10), every one of NP processes enabled gpucoll on
# COMM (e.g. MPI_COMM_WORLD), and no other component with a higher priority.
gpucoll_selected_on() {
    # Processes' lines can run into each other ("...comm_select: sele[vm:12]
    # coll:base:..."): each "[host:pid] coll:base" starts a line of its own.
    sed 's/\(.\)\(\[[^]]*\] coll:base:\)/\1\
\2/g' "$MPI_OUT" | awk -v np="$1" -v want="$2" '
        match($0, /^\[[^]]*\]/) { pid = substr($0, RSTART, RLENGTH) }
        / coll:base:comm_select: new communicator: / {
            n = split($0, w, " "); cur[pid] = w[n - 2]
        }
        / coll:base:comm_select: selecting +gpucoll, priority +[0-9]+, Enabled/ {
            if (cur[pid] == want) { ok[pid] = 1; prio[pid] = $(NF - 1) + 0 }
        }
        / coll:base:comm_select: selecting +[^ ]+, priority +[0-9]+, Enabled/ {
            if (cur[pid] == want && $0 !~ / gpucoll,/) {
                p = $0; sub(/.*priority +/, "", p); sub(/,.*/, "", p)
                if (p + 0 > other[pid]) other[pid] = p + 0
            }
        }
        END {
            good = 0
            for (q in ok) if (ok[q] && prio[q] > other[q]) good++
            if (good != np) {
                printf "gpucoll selected on %s in %d of %d processes\n", want, good, np
                exit 1
            }
            printf "gpucoll selected on %s in all %d processes\n", want, np
        }'
}
