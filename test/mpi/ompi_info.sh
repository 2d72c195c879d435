#!/bin/sh
# ompi_info.sh - ompi_info finds the component (once) and lists its
# parameters priority, device, verbose, flags, host_pipeline, progress_thread,
# chunk_size and ipc_cache_size, each with help text; the default priority
# is above tuned's (30) so that gpucoll wins on every communicator.
set -eu
. "$(dirname "$0")/mpi-env.sh"

OMPI_INFO=${OMPI_INFO:-$(dirname "$(command -v "${MPIRUN%% *}")")/ompi_info}
[ -x "$OMPI_INFO" ] || OMPI_INFO=ompi_info
# In a sanitizer build ompi_info (not instrumented) opens an instrumented
# component: the sanitizer's runtime has to come first.
preload=${SAN_PRELOAD:+LD_PRELOAD=$SAN_PRELOAD}
out=$MPI_TMP/ompi_info.txt

echo "+ $OMPI_INFO"
timeout 60 env $preload "$OMPI_INFO" >"$out" 2>&1 || { cat "$out"; fail "ompi_info failed"; }
grep 'MCA coll:' "$out"
n=$(grep -c 'MCA coll: gpucoll ' "$out" || true)
[ "$n" -eq 1 ] || fail "ompi_info lists coll/gpucoll $n times, expected once"
if grep -q 'unable to open' "$out"; then
    grep 'unable to open' "$out"
    fail "Open MPI could not open a file of the component directory"
fi

echo "+ $OMPI_INFO --param coll gpucoll --level 9 --parsable"
timeout 60 env $preload "$OMPI_INFO" --param coll gpucoll --level 9 --parsable >"$out" 2>&1 ||
    { cat "$out"; fail "ompi_info --param failed"; }
cat "$out"
grep -q '^mca:coll:gpucoll:version:"component:' "$out" || fail "no component version line"
for p in priority device verbose flags host_pipeline progress_thread chunk_size ipc_cache_size host_cache; do
    key="mca:coll:gpucoll:param:coll_gpucoll_$p"
    grep -q "^$key:value:" "$out" || fail "parameter coll_gpucoll_$p is not listed"
    help=$(sed -n "s/^$key:help://p" "$out")
    [ "${#help}" -ge 20 ] || fail "parameter coll_gpucoll_$p has no (or a too short) help text: '$help'"
done
prio=$(sed -n 's/^mca:coll:gpucoll:param:coll_gpucoll_priority:value://p' "$out")
[ "$prio" -gt 30 ] || fail "default priority $prio is not above tuned's 30"
for v in auto cuda emu; do
    grep -q "^mca:coll:gpucoll:param:coll_gpucoll_device:enumerator:value:[0-9]*:$v\$" "$out" ||
        fail "coll_gpucoll_device does not list the value '$v'"
done

echo "+ $OMPI_INFO --param coll gpucoll --level 9 (human-readable)"
timeout 60 env $preload "$OMPI_INFO" --param coll gpucoll --level 9 >"$out" 2>&1 ||
    { cat "$out"; fail "ompi_info --param failed"; }
cat "$out"
for p in priority device verbose flags host_pipeline progress_thread chunk_size ipc_cache_size host_cache; do
    grep -q "parameter \"coll_gpucoll_$p\"" "$out" || fail "coll_gpucoll_$p missing"
done
echo "PASS: ompi_info lists coll/gpucoll and its parameters"
