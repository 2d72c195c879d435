#!/bin/sh
# bench_smoke.sh - perf/gpucoll_bench runs and validates every collective:
# emu device buffers through gpucoll (out of place, in place with another type
# and op, three ranks, nonblocking and persistent forms), and host buffers with
# the component off; perf/gpucoll_host_overhead runs. Run by `make check`
# (GPUCOLL_BUILDDIR and MPIRUN come from the Makefile); exit 77 skips.
B=${GPUCOLL_BUILDDIR:-$(pwd)}
MPIRUN=${MPIRUN:-mpirun}
bench=$B/perf/gpucoll_bench

command -v "${MPIRUN%% *}" >/dev/null 2>&1 || { echo "SKIP: no $MPIRUN"; exit 77; }
[ -x "$bench" ] || { echo "FAIL: $bench is missing"; exit 1; }
[ -f "$B/coll/.libs/mca_coll_gpucoll.so" ] || { echo "FAIL: the component is not built"; exit 1; }

OMPI_MCA_mca_base_component_path=$B/coll/.libs:SYS_DEFAULT:USER_DEFAULT
LD_LIBRARY_PATH=$B/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_MCA_mca_base_component_path LD_LIBRARY_PATH
# Sanitizer builds: no leak checks under MPI (test/mpi/mpi-env.sh says why).
case ",${GPUCOLL_SANITIZERS:-}," in
*,address,*) export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" ;;
esac
root=
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
tmo=
command -v timeout >/dev/null 2>&1 && tmo="timeout 60"

out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
# A table row: a size first (not the indented lines of a warning that PMIx
# prints under Open MPI 5.0 and 6.0, nor any other text).
row='^ +[0-9]'

# run NAME NP MPIRUN-ARGS -- BENCH-ARGS: must exit 0 and validate every size
run() {
    name=$1
    np=$2
    shift 2
    margs=
    while [ "$1" != "--" ]; do margs="$margs $1"; shift; done
    shift
    # shellcheck disable=SC2086
    set -- $tmo $MPIRUN $root --oversubscribe -np "$np" $margs "$bench" all -m 4:64K -i 20 -w 2 -c "$@"
    echo "\$ $*"
    "$@" >"$out" 2>&1
    rc=$?
    cat "$out"
    if [ $rc != 0 ]; then
        echo "FAIL: $name: exit $rc"
        fail=1
        return 1
    fi
    if ! grep -q '^# validation: all sizes passed' "$out" || grep -q 'FAIL' "$out"; then
        echo "FAIL: $name: validation did not pass"
        fail=1
        return 1
    fi
    # six tables, each with rows
    ntables=$(grep -c '^# gpucoll_bench ' "$out")
    nrows=$(grep -cE "$row" "$out")
    if [ "$ntables" != 6 ] || [ "$nrows" -lt 60 ]; then
        echo "FAIL: $name: $ntables tables, $nrows rows (want 6 tables, >= 60 rows)"
        fail=1
        return 1
    fi
    return 0
}

# device buffers: every row must come from the component (never "off")
if run "emu" 2 --mca coll_gpucoll_device emu -- -d emu; then
    if grep -E "$row" "$out" | awk '$9 == "off" { bad = 1 } END { exit !bad }'; then
        echo "FAIL: emu: a device-buffer row says the component was off"
        fail=1
    fi
fi
run "emu in-place int32 max" 2 --mca coll_gpucoll_device emu -- -d emu --in-place -t int32 -o max -r 1
# three ranks: uneven reduce_scatter counts, blocks that do not divide sizes
run "emu np 3" 3 --mca coll_gpucoll_device emu -- -d emu -t double -r 2
# nonblocking and persistent forms (staged), validated
run "emu nonblocking" 2 --mca coll_gpucoll_device emu -- -d emu -f nonblocking
run "emu persistent np 3" 3 --mca coll_gpucoll_device emu -- -d emu -f persistent --in-place
# host buffers, component off: plain Open MPI; every row must say "off"
if run "host, component off" 2 --mca coll ^gpucoll -- -d host; then
    if grep -E "$row" "$out" | awk '$9 != "off" { bad = 1 } END { exit !bad }'; then
        echo "FAIL: host/off: a row says the component was on"
        fail=1
    fi
fi

# perf/gpucoll_host_overhead: runs, prints a row per size and checks itself
# that gpucoll saw the "on" calls and not the "off" ones (gpucoll_enable)
for coll in allreduce bcast allgather; do
    # shellcheck disable=SC2086
    set -- $tmo $MPIRUN $root --oversubscribe -np 2 --mca coll_gpucoll_device emu \
        "$B/perf/gpucoll_host_overhead" -c $coll -m 4:64 -i 50 -r 3 -w 5
    echo "\$ $*"
    "$@" >"$out" 2>&1
    rc=$?
    cat "$out"
    rows=$(grep -cE "$row" "$out")
    if [ $rc != 0 ] || [ "$rows" != 5 ]; then
        echo "FAIL: gpucoll_host_overhead $coll: exit $rc, $rows rows (want 0 and 5)"
        fail=1
    fi
done

[ $fail = 0 ] && echo "PASS"
exit $fail
