#!/usr/bin/env bash
# contrib/host-cost.sh - instructions of gpucoll's own code per host-buffer
# call (issue #6 item 7), counted by callgrind: rank 0 of an np 2 host
# collective runs N calls under valgrind; the instructions spent in
# libgpucoll and mca_coll_gpucoll, divided by N (setup included: a few
# instructions per call at the default N). Deterministic for a given N where
# timings on a shared VM are not (a change of a few nanoseconds is below
# their noise). Since declines on one node wait for nobody, bcast and
# allgather count as steadily as allreduce (before, rank 0, slowed by
# valgrind yet able to run ahead, could spin in the window of post kinds).
#
#   contrib/host-cost.sh                       # _build/default, allreduce 1 KiB, 40000 calls
#   contrib/host-cost.sh -b /tmp/old/_b -s 8   # another build, 8 bytes
set -u

usage() {
    cat <<'EOF'
usage: contrib/host-cost.sh [-b BUILDDIR] [-s BYTES] [-n CALLS] [-c COLL]
  -b BUILDDIR  build tree (default: _build/default next to this script)
  -s BYTES     buffer size (default 1024)
  -n CALLS     calls (default 40000)
  -c COLL      collective (default allreduce)
Needs valgrind and mpirun. Prints one line:
  COLL BYTES B: N instructions of gpucoll code per host call (build BUILDDIR)
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
build="$here/../_build/default"
bytes=1024
calls=40000
coll=allreduce
while getopts "b:s:n:c:h" opt; do
    case $opt in
        b) build=$OPTARG ;;
        s) bytes=$OPTARG ;;
        n) calls=$OPTARG ;;
        c) coll=$OPTARG ;;
        h) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done
build=$(cd "$build" && pwd) || exit 2
for tool in valgrind mpirun; do
    command -v $tool >/dev/null || { echo "host-cost.sh: $tool not found" >&2; exit 2; }
done
# The real program: perf/gpucoll_bench is a libtool wrapper script, under
# which valgrind would profile the shell.
bench="$build/perf/.libs/gpucoll_bench"
[ -x "$bench" ] || bench="$build/perf/gpucoll_bench"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Instructions in gpucoll's objects for a run of $1 calls.
gpucoll_instructions() {
    local n=$1 out="$work/cg.$1"
    mpirun -np 2 --oversubscribe -x LD_LIBRARY_PATH="$build/src/.libs" \
        --mca mca_base_component_path "$build/coll/.libs:SYS_DEFAULT:USER_DEFAULT" \
        --mca coll_gpucoll_device emu \
        sh -c "if [ \$OMPI_COMM_WORLD_RANK = 0 ]; then
                   exec valgrind -q --tool=callgrind --compress-strings=no --compress-pos=no --callgrind-out-file=$out $bench $coll -d host -m $bytes:$bytes -i $n -w 10 -T 100000
               else
                   exec $bench $coll -d host -m $bytes:$bytes -i $n -w 10 -T 100000
               fi" >"$work/log.$n" 2>&1 || { cat "$work/log.$n" >&2; return 1; }
    # Self cost by object, from the profile itself: "ob=" names the object of
    # the functions that follow, a cost line after "calls=" is a callee's
    # (inclusive) and is skipped. (callgrind_annotate's listing, used
    # before, leaves the object out of some lines, those of code inlined
    # from a header among them, and so counted part of the component only.)
    awk '/^ob=/ { ob = $0 }
         /^calls=/ { callee = 1; next }
         /^[0-9]/ { if (callee) { callee = 0; next }
                    if (ob ~ /libgpucoll|mca_coll_gpucoll/) s += $2 }
         END { print s + 0 }' "$out"
}

total=$(gpucoll_instructions "$calls") || exit 1
echo "$coll $bytes B: $((total / calls)) instructions of gpucoll code per host call (build $build)"
