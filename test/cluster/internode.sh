#!/bin/sh
# internode.sh (cluster) - the path between nodes across real hosts: network
# namespaces on a bridge, each with its own eth0, host name, IPC and
# /dev/shm (test/cluster/cluster.sh), mpirun started in gc-h0 and its
# daemons on the other hosts through the launcher agent, as over ssh; UCX
# over eth0; emu device buffers. Nodes are told apart by gpucoll itself
# (host names differ), not faked with GPUCOLL_HOSTID.
#  1. test_internode (results, composition, bytes sent between nodes against
#     the bound) on 2x2, 4x1, 2x1, 2+1+1 and 3+3+2 ranks per host, UCX over
#     tcp (UCX_TLS=tcp,self), and 2+1+1 over UCX's default transports;
#  2. test_collectives (every collective x type x op x count x in place x
#     root x mixed memory kinds, --expect accelerated, the algorithms of
#     test/mpi/internode.sh) on the same five shapes;
#  3. test_mixed (host and device buffers mixed across ranks and hosts) on
#     2x2 and 2+1+1;
#  4. test_forms --between-nodes --quick (every collective nonblocking and
#     persistent, the path of each call from the counters) on 2x2 and
#     2+1+1 with the progress threads on, 3+3+2 auto, 4x1 off;
# after every run: no process of the job left on any host, nothing left in
# any host's /dev/shm. Each run prints the bytes each host's eth0 sent.
# Skipped (77) where the machine refuses the hosts (not root, no network
# namespaces, veths or bridges) or gpucoll was built without UCX.
set -eu
. "$(dirname "$0")/../mpi/mpi-env.sh"

. "$(dirname "$0")/cluster-env.sh"
start=$(date +%s)
cluster_up 4

# np_of SHAPE / hosts_of SHAPE: its ranks / hosts (2x2: 4 / 2; 2+1+1: 4 / 3).
np_of() {
    case $1 in
    *x*) echo $((${1%x*} * ${1#*x})) ;;
    *) echo $(($(echo "$1" | tr '+' ' ' | sed 's/ / + /g'))) ;;
    esac
}
hosts_of() {
    case $1 in
    *x*) echo "${1%x*}" ;;
    *) echo "$1" | tr '+' '\n' | wc -l ;;
    esac
}

# left: the processes and /dev/shm entries left on the hosts (none after a
# job that ended well; mpirun's daemons may need a moment to go).
left() {
    _t=0
    while :; do
        _left=
        for _h in $("$cluster" hosts); do
            _p=$("$cluster" procs "$_h")
            _s=$("$cluster" shm "$_h")
            [ -z "$_p$_s" ] || _left="$_left
$_h: processes: $_p /dev/shm: $_s"
        done
        if [ -z "$_left" ] || [ "$_t" -ge 50 ]; then break; fi
        sleep 0.1
        _t=$((_t + 1))
    done
    echo "$_left"
}

# on SHAPE [mpirun options...] -- PROG [ARGS...]: PROG on the hosts of SHAPE
# (2x2: 2 hosts x 2 ranks; 2+1+1: 2, 1 and 1 ranks), mpirun in gc-h0.
on() {
    _shape=$1
    shift
    # shellcheck disable=SC2046 # words
    _tx0=$(for _h in $("$cluster" hosts); do "$cluster" tx "$_h"; done)
    MPIRUN="$cluster exec gc-h0 $mpirun_cmd $("$cluster" mpirun-args "$_shape")"
    _t0=$(date +%s)
    run_mpi "$(np_of "$_shape")" --mca coll_gpucoll_device "$TEST_DEVICE" "$@"
    MPIRUN=$mpirun_cmd
    _i=0
    _sent=
    for _h in $("$cluster" hosts); do
        _i=$((_i + 1))
        [ "$_i" -le "$(hosts_of "$_shape")" ] || break
        _b=$(echo "$_tx0" | sed -n "${_i}p")
        _sent="$_sent $_h $(($("$cluster" tx "$_h") - _b))"
    done
    echo "shape $_shape: $(($(date +%s) - _t0)) s; bytes sent on eth0:$_sent"
    _l=$(left)
    [ -z "$_l" ] || fail "left on the hosts after the job:$_l"
}

tcp="-x UCX_TLS=tcp,self"
echo "== 1. test_internode across hosts"
for shape in 2x2 4x1 2x1 2+1+1 3+3+2; do
    # shellcheck disable=SC2086 # words
    on "$shape" $tcp -- "$MPI_TESTDIR/test_internode"
done
on 2+1+1 -- "$MPI_TESTDIR/test_internode"

echo "== 2. test_collectives across hosts"
for shape in 2x2 4x1 2x1 2+1+1 3+3+2; do
    allreduce=hier
    case $shape in 2+1+1 | 3+3+2) allreduce=leader ;; esac
    # shellcheck disable=SC2086 # words
    on "$shape" $tcp -- "$MPI_TESTDIR/test_collectives" --no-large --expect accelerated \
        --algorithm allreduce=$allreduce --algorithm bcast=hier --algorithm allgather=leader \
        --algorithm reduce=leader --algorithm reduce_scatter=leader \
        --algorithm reduce_scatter_block=leader
done

echo "== 3. test_mixed across hosts (host and device buffers mixed across ranks and hosts)"
for shape in 2x2 2+1+1; do
    # shellcheck disable=SC2086 # words
    on "$shape" $tcp -- "$MPI_TESTDIR/test_mixed" --expect any
done

echo "== 4. test_forms across hosts (nonblocking and persistent calls; progress threads on, auto, off)"
# What each call took is checked from the counters: the accelerated set
# between nodes with the threads (which exchange the nodes' verdicts),
# staged without them; every other collective staged or delegated.
for run in "2x2|on|--quick" "3+3+2|auto|--quick" "2+1+1|on|--quick" "4x1|off|--quick"; do
    shape=${run%%|*} rest=${run#*|}
    threads=${rest%%|*} quick=${rest#*|}
    # shellcheck disable=SC2086 # words
    on "$shape" $tcp --mca coll_gpucoll_progress_thread "$threads" -- \
        "$MPI_TESTDIR/test_forms" --between-nodes $quick
done

echo "PASS: internode across $("$cluster" hosts | wc -l) namespace hosts in $(($(date +%s) - start)) s"
