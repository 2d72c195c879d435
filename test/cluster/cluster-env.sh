# cluster-env.sh - sourced by the test scripts of test/cluster after
# test/mpi/mpi-env.sh: skips (77) without UCX or root or under sanitizers, claims a cluster id
# of its own (runs at once do not meet), tears its hosts down at exit, and
#   cluster_up N: brings up hosts gc-h0..gc-h{N-1} (skips where the machine
#   refuses them);
# $cluster is cluster.sh's path, $mpirun_cmd the plain mpirun.
grep -q '^#define GPUCOLL_HAVE_UCX 1' "$GPUCOLL_BUILDDIR/config.h" ||
    skip "gpucoll was built without UCX"
[ "$(id -u)" = 0 ] || skip "namespace hosts need root"
# Across hosts the code is the same as across faked nodes, which the
# sanitizer jobs run (test/mpi/internode.sh): not again there (CI's time).
[ -z "${GPUCOLL_SANITIZERS:-}" ] || skip "not under sanitizers (test/mpi/internode.sh is)"
# ORTE (4.1) takes plm_rsh_agent; PRRTE (5.0, 6.0) plm_ssh_agent: cluster.sh
# mpirun-args gives the right names (5.0 tried by hand: README; 6.0 untested).

cluster=$GPUCOLL_SRCDIR/test/cluster/cluster.sh
GPUCOLL_CLUSTER_MPIRUN=$MPIRUN
GPUCOLL_CLUSTER_ID=$("$cluster" claim $$) || fail "no cluster id"
export GPUCOLL_CLUSTER_ID GPUCOLL_CLUSTER_MPIRUN
# shellcheck disable=SC2064 # expanded now
trap "\"$cluster\" down; rm -rf \"$MPI_TMP\"" EXIT
trap 'exit 130' INT TERM HUP
# shellcheck disable=SC2034 # used by the scripts that source this file
mpirun_cmd=$MPIRUN

cluster_up() {
    echo "== cluster $GPUCOLL_CLUSTER_ID: $1 hosts"
    _start=$(date +%s)
    _rc=0
    "$cluster" up "$1" >"$MPI_TMP/up" 2>&1 || _rc=$?
    cat "$MPI_TMP/up"
    [ "$_rc" -ne 77 ] || skip "$(tail -1 "$MPI_TMP/up")"
    [ "$_rc" -eq 0 ] || fail "cluster.sh up $1 failed ($_rc)"
    "$cluster" status
    echo "up in $(($(date +%s) - _start)) s"
}
