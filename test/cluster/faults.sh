#!/bin/sh
# faults.sh (cluster) - faults between real hosts (test/cluster/cluster.sh:
# network namespaces on a bridge), in the middle of a loop of accelerated
# 1 MiB device allreduces (test_faults, emu, hier, UCX over tcp on eth0) on
# 2 hosts x 2 ranks, mpirun on gc-h0:
#  1. gc-h1's link down for good: every rank's call fails (MPI_ERRORS_RETURN)
#     within coll_gpucoll_peer_timeout (10 s here) plus 5 s, on both sides
#     of the cut, the ranks of gc-h0 name the lost rank and its host; every
#     rank ends (MPI_Abort), gc-h1's by themselves; mpirun (Open MPI's, which
#     waits for gc-h1's daemon) is then ended by the test, and nothing of the
#     job is left on gc-h0;
#  2. gc-h1's link down for 10 s, then up: every call completes with the
#     right values (default peer timeout);
#  3. gc-h1's processes stopped for 8 s (longer than coll_gpucoll_wait_warning,
#     3 s here), then resumed: every call completes, right values, and the
#     waiting ranks said whom they waited for;
#  4. a rank of gc-h1 killed (SIGKILL): the job ends within 30 s, nothing is
#     left on either host, no /dev/shm entry of gpucoll's (its shared memory
#     is memfd; none may appear).
# Each rank writes what it saw into a file of a directory all hosts share
# (a host whose link is down cannot send its output to mpirun).
# Skipped (77) where the machine refuses the hosts or gpucoll has no UCX.
# GPUCOLL_FAULTS="1 3": run only these parts; GPUCOLL_FAULTS_MPIRUN: more
# mpirun options for every job (e.g. "-x UCX_TCP_KEEPIDLE=2s").
set -eu
. "$(dirname "$0")/../mpi/mpi-env.sh"

[ "$TEST_DEVICE" = emu ] || skip "the fault tests run on emu"
. "$(dirname "$0")/cluster-env.sh"
cluster_up 2
# shellcheck disable=SC2046 # words
set -- $("$cluster" mpirun-args 2x2)
args="$*"

now() { date +%s; }
# start NAME SECONDS [mpirun options...]: the loop in the background; its
# directory in $dir, mpirun's pid in $job.
start() {
    dir=$MPI_TMP/$1
    _s=$2
    shift 2
    mkdir -p "$dir"
    echo "+ $MPIRUN -np 4 $args ${GPUCOLL_FAULTS_MPIRUN:-} $* test_faults $dir --seconds $_s ${linger:-}"
    # shellcheck disable=SC2086 # words
    "$cluster" exec gc-h0 timeout -k 5 "$GPUCOLL_TEST_TIMEOUT" $MPIRUN -np 4 $args \
        --mca coll_gpucoll_device emu -x UCX_TLS=tcp,self \
        --mca coll_gpucoll_allreduce_algorithm hier ${GPUCOLL_FAULTS_MPIRUN:-} "$@" \
        "$MPI_TESTDIR/test_faults" "$dir" --seconds "$_s" ${linger:-} >"$dir/out" 2>&1 &
    job=$!
    t_start=$(now)
}
# progressed N: every rank has done N calls (at most 60 s).
progressed() {
    _t=0
    while [ "$_t" -lt 600 ]; do
        _ok=1
        for _r in 0 1 2 3; do
            _n=$(grep -c '^progress' "$dir/rank.$_r" 2>/dev/null || true)
            [ "${_n:-0}" -ge "$1" ] || _ok=0
        done
        [ "$_ok" = 0 ] || return 0
        sleep 0.1
        _t=$((_t + 1))
    done
    cat "$dir/out"
    fail "the ranks did not reach $1 calls in 60 s"
}
# finish: waits for mpirun; its exit status in $job_rc, seconds in $job_s.
finish() {
    job_rc=0
    wait "$job" || job_rc=$?
    job_s=$(($(now) - t_start))
    echo "mpirun ended with status $job_rc after $job_s s"
}
last() { tail -n 1 "$dir/rank.$1" 2>/dev/null || true; }
# all_ok WHAT: the job succeeded and every rank's calls were right across WHAT.
all_ok() {
    for _r in 0 1 2 3; do echo "rank $_r: $(last "$_r")"; done
    [ "$job_rc" -eq 0 ] || { cat "$dir/out"; fail "the job failed across $1 (status $job_rc)"; }
    for _r in 0 1 2 3; do
        case $(last $_r) in ok*) ;; *) fail "rank $_r across $1: $(last $_r)" ;; esac
    done
}
# gone HOST SECONDS: no test_faults process left on HOST within SECONDS.
gone() {
    _t=0
    while "$cluster" procs "$1" | awk '$3 ~ /test_faults$/ { found = 1 } END { exit !found }'; do
        [ "$_t" -lt $(($2 * 10)) ] || return 1
        sleep 0.1
        _t=$((_t + 1))
    done
}
shm_of_ours() {
    for _h in gc-h0 gc-h1; do "$cluster" shm "$_h" | grep -i gpucoll || true; done
}

part1() {
    echo "== 1. gc-h1's link down for good in the middle of the loop"
    timeout=10
    linger="--linger 20"
    start linkdown 120 --mca coll_gpucoll_peer_timeout $timeout
    progressed 5
    cut=$(now)
    "$cluster" link gc-h1 down
    echo "link of gc-h1 down at $((cut - t_start)) s"
    # Every rank's call fails, on both sides of the cut, and every rank ends.
    _t=0
    while [ "$_t" -lt $(((timeout + 30) * 10)) ]; do
        _n=0
        for r in 0 1 2 3; do
            case $(last $r) in failed*) _n=$((_n + 1)) ;; esac
        done
        [ "$_n" -lt 4 ] || break
        sleep 0.1
        _t=$((_t + 1))
    done
    echo "every rank's call failed by $(($(now) - cut)) s after the cut"
    for r in 0 1 2 3; do
        echo "rank $r: $(last "$r")"
        case $(last $r) in
        failed*) ;;
        *) fail "rank $r did not report a failed call within $((timeout + 30)) s: $(last $r)" ;;
        esac
        after=$(last $r | cut -d' ' -f3)
        awk -v a="$after" -v t="$timeout" 'BEGIN { exit !(a <= t + 5) }' ||
            fail "rank $r's call failed after $after s, more than the peer timeout ($timeout s) + 5 s"
    done
    linger=
    # Each rank lingers 20 s after its failure, then aborts.
    gone gc-h0 30 || fail "ranks left on gc-h0: $("$cluster" procs gc-h0)"
    gone gc-h1 30 || fail "gc-h1's ranks did not end by themselves: $("$cluster" procs gc-h1)"
    cat "$dir/out"
    grep -q 'rank [23] on host gc-h1 is unreachable' "$dir/out" ||
        fail "no message naming gc-h1 as unreachable in the output of gc-h0's ranks"
    # Every rank has ended; mpirun (Open MPI's runtime, not gpucoll) waits
    # for gc-h1's daemon: its connection to it holds unacknowledged data,
    # so its TCP keepalive never speaks (about 15 minutes of retransmissions).
    # The test ends it, as a user or the batch system would.
    sleep 2
    echo "mpirun still running $(($(now) - cut)) s after the cut: ended by the test"
    pkill -TERM -P "$job" 2>/dev/null || :
    sleep 3
    pkill -KILL -P "$job" 2>/dev/null || :
    finish
    gone gc-h0 5 || :
    [ -z "$("$cluster" procs gc-h0)" ] ||
        fail "processes of the job left on gc-h0: $("$cluster" procs gc-h0)"
    echo "left on gc-h1 (cut off: Open MPI's daemon): $("$cluster" procs gc-h1 | cut -c1-40 | tr '\n' ';')"
    "$cluster" link gc-h1 up
}

part2() {
    echo "== 2. gc-h1's link down for 10 s, then up"
    start linkflap 40
    progressed 5
    "$cluster" link gc-h1 down
    sleep 10
    "$cluster" link gc-h1 up
    finish
    all_ok "a 10 s outage"
}

part3() {
    echo "== 3. gc-h1's processes stopped for 8 s, then resumed"
    start stop 30 --mca coll_gpucoll_wait_warning 3
    progressed 5
    "$cluster" stop gc-h1
    sleep 8
    "$cluster" cont gc-h1
    finish
    all_ok "an 8 s stop"
    grep 'has waited 3 s for rank' "$dir/out" | head -n 2
    grep -q 'has waited 3 s for rank [23] on another node' "$dir/out" ||
        fail "gc-h0's ranks did not say that they waited for gc-h1's"
}

part4() {
    echo "== 4. a rank of gc-h1 killed"
    start kill 60
    progressed 5
    victim=$(sed -n 's/^host gc-h1 pid \([0-9]*\)$/\1/p' "$dir/rank.3")
    [ -n "$victim" ] || fail "rank 3's pid is unknown"
    kill -KILL "$victim"
    killed=$(now)
    finish
    ended=$(($(now) - killed))
    [ "$job_rc" -ne 0 ] || fail "mpirun succeeded although rank 3 was killed"
    [ "$ended" -le 30 ] || fail "the job ended $ended s after rank 3 was killed (more than 30 s)"
    gone gc-h0 10 || fail "processes left on gc-h0: $("$cluster" procs gc-h0)"
    gone gc-h1 10 || fail "processes left on gc-h1: $("$cluster" procs gc-h1)"
    [ -z "$(shm_of_ours)" ] || fail "gpucoll's entries left in /dev/shm: $(shm_of_ours)"
    echo "ended $ended s after the kill; /dev/shm of the hosts: $("$cluster" shm gc-h0 | wc -l) and $("$cluster" shm gc-h1 | wc -l) entries (Open MPI's)"
}

for part in ${GPUCOLL_FAULTS:-1 2 3 4}; do
    "part$part"
done
echo "PASS: faults"
