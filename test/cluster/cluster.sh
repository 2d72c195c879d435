#!/bin/bash
# cluster.sh - a cluster of hosts on one Linux machine, for testing gpucoll
# between real (network-separated) nodes: each host gc-hI is a network
# namespace with its own eth0 (a veth on a bridge in the root namespace,
# address 10.77.0.(10+I)/24), and its processes have their own host name
# (UTS), System V IPC (IPC) and mounts (a private /dev/shm, /sys showing
# its own network, an /etc/hosts naming every host). A holder process per
# host keeps the namespaces; `exec` and the launcher agent enter them with
# nsenter. Needs root. Usage and a worked example: test/cluster/README.md.
#
#   cluster.sh up N [SLOTS]     N hosts (SLOTS per host in the hostfile: 1)
#   cluster.sh down             every process of the hosts killed, all removed
#   cluster.sh claim [PID]      prints a free cluster id (10-99) for PID's use
#   cluster.sh status           the hosts, their holders and addresses
#   cluster.sh exec HOST CMD... CMD inside HOST (cwd and environment kept)
#   cluster.sh agent            path of the ssh-style launcher agent for mpirun
#   cluster.sh mpirun-args [SHAPE]  mpirun's options for a run on the hosts
#   cluster.sh hostfile [SHAPE] path of a hostfile (SHAPE: 2x2, 2+1+1, 3,3,2)
#   cluster.sh hosts            the host names, one a line
#   cluster.sh link HOST down|up     the host's cable pulled / plugged again
#   cluster.sh shape HOST RATE|off   tbf on the host's egress (1gbit, 100mbit)
#   cluster.sh stop HOST / cont HOST SIGSTOP / SIGCONT every process of HOST
#   cluster.sh procs HOST       HOST's processes (pid, state, command), holder aside
#   cluster.sh shm HOST         HOST's /dev/shm entries
#   cluster.sh tx HOST / rx HOST bytes sent / received by HOST's eth0
#
# HOST: gc-hI, I, or the address 10.77.0.(10+I).
# GPUCOLL_CLUSTER_ID=K (0-99, default 0) runs cluster K beside the others:
# its bridge is gcbrK, its state /run/gpucoll-cluster/K; the host names and
# addresses are the same in every cluster (the bridges are not connected).
# Scripts take an id of their own, so that two runs at once do not meet:
#   GPUCOLL_CLUSTER_ID=$(cluster.sh claim $$); export GPUCOLL_CLUSTER_ID
# (claimed until `down`, or until PID is gone: a later claim then takes the
# id over and tears its hosts down).
# Exit status: 0; 1 on an error; 2 on a usage error; 77 (up) where this
# machine cannot have the hosts (not root, no namespaces, no veth/bridge).
set -u

ID=${GPUCOLL_CLUSTER_ID:-0}
case $ID in
[0-9] | [1-9][0-9]) ;;
*)
    echo "cluster.sh: GPUCOLL_CLUSTER_ID must be 0-99 (not '$ID')" >&2
    exit 2
    ;;
esac
BASE=${GPUCOLL_CLUSTER_STATE:-/run/gpucoll-cluster}
STATE=$BASE/$ID
BRIDGE=gcbr$ID
NET=10.77.0
VETH_PREFIX=gc$ID-h # root-side end of host I's veth: gcK-hI (<= 15 chars)
MAX_HOSTS=64

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}
refuse() {
    echo "cluster.sh: cannot bring up hosts here: $*" >&2
    exit 77
}
usage() {
    sed -n '/^#   cluster.sh/s/^#   /usage: /p' "$0" >&2
    exit 2
}

# host_index HOST: I for gc-hI, I, or 10.77.0.(10+I); fails otherwise.
host_index() {
    local h=${1#*@} i
    case $h in
    gc-h[0-9]*) i=${h#gc-h} ;;
    "$NET".[0-9]*) i=$((${h#"$NET".} - 10)) ;;
    [0-9]*) i=$h ;;
    *) return 1 ;;
    esac
    case $i in '' | *[!0-9]*) return 1 ;; esac
    [ "$i" -lt "$(nhosts)" ] || return 1
    echo "$((10#$i))"
}
nhosts() { cat "$STATE/n" 2>/dev/null || echo 0; }

# holder I: the pid of host I's holder, if it lives and still has the
# namespaces recorded by `up`.
holder() {
    local pid
    pid=$(cat "$STATE/h$1.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(ns_of "$pid")" = "$(cat "$STATE/h$1.ns" 2>/dev/null)" ] || return 1
    echo "$pid"
}
# ns_of PID: the inodes of its net, uts, ipc and mount namespaces.
ns_of() { stat -L -c %i "/proc/$1/ns/net" "/proc/$1/ns/uts" "/proc/$1/ns/ipc" "/proc/$1/ns/mnt" 2>/dev/null | tr '\n' ' '; }

# host_arg HOST: sets I and PID (the holder) or dies.
host_arg() {
    [ $# -ge 1 ] || usage
    I=$(host_index "$1") || die "no host '$1' (hosts: $(list_hosts | tr '\n' ' '))"
    PID=$(holder "$I") || die "host gc-h$I is not up (its holder is gone; run up again)"
}
list_hosts() {
    local i=0 n
    n=$(nhosts)
    while [ "$i" -lt "$n" ]; do
        echo "gc-h$i"
        i=$((i + 1))
    done
}

# pids_in_ns NSNET NSUTS: every process whose network and UTS namespaces are
# these (inodes), one pid a line.
pids_in_ns() {
    # One stat for all processes: "inode /proc/PID/ns/net".
    stat -L -c '%i %n' /proc/[0-9]*/ns/net /proc/[0-9]*/ns/uts 2>/dev/null | awk -v net="$1" -v uts="$2" '
        { split($2, p, "/"); if ($2 ~ /\/net$/ && $1 == net) n[p[3]] = 1
          if ($2 ~ /\/uts$/ && $1 == uts) u[p[3]] = 1 }
        END { for (q in n) if (q in u) print q }' | sort -n
}
# host_pids I [all]: the processes of host I (the holder aside, unless all).
host_pids() {
    local ns net uts hp
    ns=$(cat "$STATE/h$1.ns" 2>/dev/null) || return 0
    # shellcheck disable=SC2086 # the inodes: words
    set -- "$1" "${2:-}" $ns
    net=$3 uts=$4
    [ -n "$net" ] && [ -n "$uts" ] || return 0
    hp=$(cat "$STATE/h$1.pid" 2>/dev/null)
    pids_in_ns "$net" "$uts" | while read -r p; do
        [ "$2" = all ] || [ "$p" != "$hp" ] && echo "$p"
    done
}

# signal_host I SIG [all]: SIG to every process of host I; repeated while
# new ones appear (a process may fork meanwhile).
signal_host() {
    local pass=0 seen=" " p new
    while [ $pass -lt 5 ]; do
        new=0
        for p in $(host_pids "$1" "${3:-}"); do
            case $seen in *" $p "*) [ "$2" = KILL ] || continue ;; esac
            kill -s "$2" "$p" 2>/dev/null && new=1
            seen="$seen$p "
        done
        [ $new = 1 ] || break
        pass=$((pass + 1))
    done
}

# cmd_down [keep-claim]
cmd_down() {
    local i n='' t
    for t in "$STATE"/h*.ns; do
        [ -e "$t" ] || continue
        t=${t##*/h}
        n="$n ${t%.ns}"
    done
    for i in $n; do signal_host "$i" KILL all; done
    # Wait for them to be gone (killed processes in D state linger a moment).
    for i in $n; do
        t=0
        while [ -n "$(host_pids "$i" all)" ] && [ $t -lt 50 ]; do
            sleep 0.1
            t=$((t + 1))
        done
        [ -z "$(host_pids "$i" all)" ] ||
            echo "cluster.sh: processes of gc-h$i survive SIGKILL: $(host_pids "$i" all | tr '\n' ' ')" >&2
    done
    # The veths go with their namespaces, but only when the kernel gets to
    # it (seconds later): remove them now. Deleting one end deletes both.
    for t in $(ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \(${VETH_PREFIX}[0-9]*\)[@:].*/\1/p"); do
        ip link del "$t" 2>/dev/null
    done
    if ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link del "$BRIDGE" || die "cannot remove the bridge $BRIDGE"
    fi
    rm -rf "$STATE"
    [ "${1:-}" = keep-claim ] || rm -rf "$BASE/$ID.claim"
}

# cmd_claim [PID]: the first id of 10-99 that nobody claims, or whose
# claimer is gone (its hosts torn down first), claimed for PID (default:
# the caller). mkdir is the lock.
cmd_claim() {
    local owner=${1:-$PPID} id=10 old
    case $owner in '' | *[!0-9]*) usage ;; esac
    mkdir -p "$BASE" || die "cannot create $BASE"
    while [ $id -le 99 ]; do
        if mkdir "$BASE/$id.claim" 2>/dev/null; then
            echo "$owner" >"$BASE/$id.claim/owner"
            echo "$id"
            return 0
        fi
        old=$(cat "$BASE/$id.claim/owner" 2>/dev/null) || old=
        # An empty owner: being claimed right now (mkdir, then the write).
        if [ -n "$old" ] && ! kill -0 "$old" 2>/dev/null &&
            mv "$BASE/$id.claim" "$BASE/$id.stale.$$" 2>/dev/null; then
            GPUCOLL_CLUSTER_ID=$id "$0" down
            rm -rf "$BASE/$id.stale.$$"
            continue # the same id again
        fi
        id=$((id + 1))
    done
    die "no free cluster id in 10-99 ($BASE/*.claim)"
}

# The agent: what mpirun runs instead of ssh. Generated with this cluster's
# state directory in it.
write_agent() {
    cat >"$STATE/agent" <<EOF
#!/bin/sh
# gpucoll test cluster $ID: an ssh stand-in for mpirun's launcher
# (mpirun --mca plm_rsh_agent THIS; PRRTE: --prtemca plm_ssh_agent THIS).
#   agent [ssh options] HOST [COMMAND...]
# runs COMMAND (its words joined by spaces, as ssh does) with root's login
# shell in HOST's namespaces, from the home directory, with an environment
# as sshd gives one (HOME, USER, LOGNAME, SHELL, PATH; GPUCOLL_CLUSTER_AGENT_ENV=keep:
# the caller's). Status 255 when HOST is unknown, as ssh's.
state=$STATE
net=$NET
EOF
    cat >>"$STATE/agent" <<'EOF'
while [ $# -gt 0 ]; do
    case $1 in
    --) shift; break ;;
    -[BbcDEeFIiJLlmOopQRSWw]) shift 2 ;;   # ssh's options that take a value
    -?*) shift ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || { echo "usage: $0 [ssh options] HOST [COMMAND...]" >&2; exit 255; }
h=${1#*@}
shift
case $h in
gc-h[0-9]*) i=${h#gc-h} ;;
"$net".[0-9]*) i=$((${h#"$net".} - 10)) ;;
*) i=x ;;
esac
pid=$(cat "$state/h$i.pid" 2>/dev/null) || pid=
if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    echo "ssh: Could not resolve hostname $h: not a host of $state" >&2
    exit 255
fi
sh=$(getent passwd "$(id -un)" | cut -d: -f7)
[ -x "$sh" ] || sh=/bin/sh
if [ "${GPUCOLL_CLUSTER_AGENT_ENV:-}" = keep ]; then
    set -- nsenter -t "$pid" -n -u -i -m -r --wd=/ -- "$sh" -c "cd; $*"
else
    set -- env -i HOME="$(getent passwd "$(id -un)" | cut -d: -f6)" USER="$(id -un)" \
        LOGNAME="$(id -un)" SHELL="$sh" \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        ${LANG:+LANG=$LANG} nsenter -t "$pid" -n -u -i -m -r --wd=/ -- "$sh" -c "cd; $*"
fi
[ "$#" -gt 0 ] && exec "$@"
EOF
    chmod +x "$STATE/agent"
}

# shape_list SHAPE: slots per host, space-separated ("2x2" -> "2 2",
# "2+1+1" / "2,1,1" / "2 1 1" -> "2 1 1", "3" -> "3").
shape_list() {
    local s=$1 h r out=
    case $s in
    *x*)
        h=${s%%x*} r=${s#*x}
        case $h$r in '' | *[!0-9]*) return 1 ;; esac
        while [ "$h" -gt 0 ]; do
            out="$out $r"
            h=$((h - 1))
        done
        ;;
    *)
        out=$(echo "$s" | tr '+,' '  ')
        case $out in *[!0-9\ ]*) return 1 ;; esac
        ;;
    esac
    # shellcheck disable=SC2086 # words
    set -- $out
    [ $# -ge 1 ] || return 1
    echo "$*"
}

# cmd_hostfile [SHAPE]: writes (once) and prints the hostfile's path.
cmd_hostfile() {
    local list f i=0 s
    [ "$(nhosts)" -gt 0 ] || die "no hosts up (cluster.sh up N)"
    if [ $# -eq 0 ] || [ -z "$1" ]; then
        echo "$STATE/hostfile"
        return
    fi
    list=$(shape_list "$1") || die "bad shape '$1' (2x2, 2+1+1, 3,3,2)"
    # shellcheck disable=SC2086 # words
    set -- $list
    [ $# -le "$(nhosts)" ] || die "shape $list needs $# hosts; $(nhosts) are up"
    f=$STATE/hostfile-$(echo "$list" | tr ' ' '+')
    : >"$f.tmp"
    for s in $list; do
        [ "$s" -ge 1 ] || die "a host of shape $list has no slot"
        echo "gc-h$i slots=$s" >>"$f.tmp"
        i=$((i + 1))
    done
    mv "$f.tmp" "$f"
    echo "$f"
}

cmd_up() {
    local n=${1:-} slots=${2:-1} i pid t ns
    case $n in '' | *[!0-9]*) usage ;; esac
    case $slots in '' | *[!0-9]*) usage ;; esac
    if [ "$n" -lt 1 ] || [ "$n" -gt $MAX_HOSTS ]; then die "N must be 1-$MAX_HOSTS"; fi
    [ "$(id -u)" = 0 ] || refuse "not root (network namespaces, veths and a bridge need root)"
    for t in ip unshare nsenter stat awk; do
        command -v $t >/dev/null 2>&1 || refuse "$t not found"
    done
    unshare --net --uts --ipc --mount true 2>/dev/null ||
        refuse "unshare --net --uts --ipc --mount fails (no namespaces, or not allowed)"
    # A failed or earlier run: clean up first.
    cmd_down keep-claim
    mkdir -p "$STATE" || refuse "cannot create $STATE"
    echo "$n" >"$STATE/n"
    {
        grep -v '[[:space:]]gc-h[0-9]*\([[:space:]]\|$\)' /etc/hosts
        echo "# gpucoll test cluster $ID"
        i=0
        while [ "$i" -lt "$n" ]; do
            echo "$NET.$((10 + i)) gc-h$i"
            i=$((i + 1))
        done
    } >"$STATE/hosts"
    ip link add "$BRIDGE" type bridge 2>"$STATE/err" ||
        { cat "$STATE/err" >&2; cmd_down keep-claim; refuse "cannot create a bridge ($BRIDGE)"; }
    # Bridged frames must not meet the host's firewall (br_netfilter, a
    # FORWARD policy DROP as Docker sets it).
    ip link set "$BRIDGE" type bridge nf_call_iptables 0 nf_call_ip6tables 0 \
        nf_call_arptables 0 2>/dev/null
    ip link set "$BRIDGE" up || { cmd_down keep-claim; die "cannot set $BRIDGE up"; }
    i=0
    while [ "$i" -lt "$n" ]; do
        rm -f "$STATE/h$i.ready"
        # The holder: its own namespaces, set up from inside, then sleeps.
        # Mounts: /dev/shm private (Open MPI's and UCX's shared memory),
        # /sys again (so that /sys/class/net is this host's network, as
        # UCX and hwloc read it), /etc/hosts naming every host.
        # shellcheck disable=SC2016 # expanded by the holder's shell
        setsid unshare --net --uts --ipc --mount --propagation private -- sh -c '
            set -e
            echo $$ >"$1/h$2.pid"
            hostname "gc-h$2"
            mount -t tmpfs -o mode=1777,size=50% tmpfs /dev/shm
            mount -t sysfs sysfs /sys
            mount --bind "$1/hosts" /etc/hosts
            mkdir -p /dev/mqueue && mount -t mqueue mqueue /dev/mqueue 2>/dev/null || :
            ip link set lo up
            touch "$1/h$2.ready"
            exec sleep infinity' gc-holder "$STATE" "$i" \
            </dev/null >"$STATE/h$i.log" 2>&1 &
        t=0
        while [ ! -e "$STATE/h$i.ready" ] && [ $t -lt 100 ]; do
            kill -0 $! 2>/dev/null || break
            sleep 0.05
            t=$((t + 1))
        done
        if [ ! -e "$STATE/h$i.ready" ]; then
            cat "$STATE/h$i.log" >&2
            kill $! 2>/dev/null
            cmd_down keep-claim
            refuse "host gc-h$i's namespaces could not be set up (above)"
        fi
        pid=$(cat "$STATE/h$i.pid")
        ns=$(ns_of "$pid")
        echo "$ns" >"$STATE/h$i.ns"
        if ! ip link add "$VETH_PREFIX$i" type veth peer name eth0 netns "$pid" 2>"$STATE/err"; then
            cat "$STATE/err" >&2
            cmd_down keep-claim
            refuse "cannot create a veth pair"
        fi
        if ! ip link set "$VETH_PREFIX$i" master "$BRIDGE" up ||
            ! nsenter -t "$pid" -n ip addr add "$NET.$((10 + i))/24" dev eth0 ||
            ! nsenter -t "$pid" -n ip link set eth0 up; then
            cmd_down keep-claim
            die "cannot set up gc-h$i's eth0"
        fi
        i=$((i + 1))
    done
    echo "gc-h0 slots=$slots" >"$STATE/hostfile"
    i=1
    while [ "$i" -lt "$n" ]; do
        echo "gc-h$i slots=$slots" >>"$STATE/hostfile"
        i=$((i + 1))
    done
    write_agent
    rm -f "$STATE/err"
    # Each host reaches the others (ARP through the bridge): a TCP connect
    # to a closed port is refused at once when the host is there.
    i=1
    while [ "$i" -lt "$n" ]; do
        t=0
        until nsenter -t "$(cat "$STATE/h0.pid")" -n timeout 1 \
            bash -c "exec 3<>/dev/tcp/$NET.$((10 + i))/9" 2>&1 | grep -q refused; do
            t=$((t + 1))
            [ $t -lt 50 ] || { cmd_down keep-claim; die "gc-h0 cannot reach gc-h$i"; }
            sleep 0.1
        done
        i=$((i + 1))
    done
}

cmd_status() {
    local i n pid
    n=$(nhosts)
    [ "$n" -gt 0 ] || { echo "cluster $ID: down"; return 0; }
    echo "cluster $ID: $n hosts, bridge $BRIDGE, state $STATE"
    i=0
    while [ "$i" -lt "$n" ]; do
        if pid=$(holder "$i"); then
            printf 'gc-h%s  %s.%s  holder %s  link %s  processes %s\n' "$i" "$NET" $((10 + i)) "$pid" \
                "$(cat "/sys/class/net/$VETH_PREFIX$i/operstate" 2>/dev/null || echo gone)" \
                "$(host_pids "$i" | wc -l)"
        else
            printf 'gc-h%s  %s.%s  holder gone\n' "$i" "$NET" $((10 + i))
        fi
        i=$((i + 1))
    done
}

# mpirun's options for this cluster (Open MPI 4.1: ORTE's names; 5.0 and
# 6.0: PRRTE's for the launcher and out-of-band, Open MPI's for the rest).
cmd_mpirun_args() {
    local hf v args
    hf=$(cmd_hostfile "${1:-}") || exit 1
    case $(${GPUCOLL_CLUSTER_MPIRUN:-mpirun} --version 2>/dev/null | head -1) in
    *" 4."* | *" 3."*)
        args="--hostfile $hf --mca plm_rsh_agent $STATE/agent --mca plm_rsh_no_tree_spawn 1"
        args="$args --mca oob_tcp_if_include $NET.0/24"
        ;;
    *)
        args="--hostfile $hf --prtemca plm_ssh_agent $STATE/agent --prtemca plm_ssh_no_tree_spawn 1"
        args="$args --prtemca oob_tcp_if_include $NET.0/24"
        # Ranks fill the hostfile's slots in order, as ORTE's default: with
        # oversubscription allowed (test/mpi/mpi-env.sh) PRRTE's default
        # mapping put all 4 ranks of 2x2 on gc-h0.
        args="$args --map-by slot"
        ;;
    esac
    args="$args --mca btl_tcp_if_include $NET.0/24 -x UCX_NET_DEVICES=eth0"
    # The hosts share this machine's cores, though each believes they are
    # all its own: where the job has more ranks than the machine has cores,
    # say so, as mpirun does by itself for an oversubscribed node (a rank
    # waiting in MPI yields the core).
    # Without it a rank spinning in MPI_Wait starves its own progress
    # thread: 4 KiB MPI_Iallreduce at 2x2 with coll_gpucoll_progress_thread
    # on took 1.4 s, 44 ms with it (a loaded 2-core VM).
    [ "$(awk -F'slots=' '{n += $2} END {print n}' "$hf")" -le "$(nproc)" ] ||
        args="$args --mca mpi_yield_when_idle 1"
    # What a process started on another host needs from this environment
    # (the agent, like ssh, gives a clean one; OMPI_MCA_* travel by themselves).
    for v in LD_LIBRARY_PATH ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS LSAN_OPTIONS; do
        eval "[ -n \"\${$v+set}\" ]" && args="$args -x $v"
    done
    echo "$args"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
up) cmd_up "$@" ;;
down) cmd_down ;;
claim) cmd_claim "$@" ;;
status) cmd_status ;;
hosts) list_hosts ;;
exec)
    host_arg "$@"
    shift
    [ $# -gt 0 ] || usage
    # nsenter execs (no fork): signals and the exit status are CMD's own.
    # -r: the holder's root directory, not the mount namespace's (inside a
    # chroot, such as contrib/rootfs.sh's, they differ).
    exec nsenter -t "$PID" -n -u -i -m -r --wd="$PWD" -- "$@"
    ;;
agent)
    [ -x "$STATE/agent" ] || die "no hosts up (cluster.sh up N)"
    echo "$STATE/agent"
    ;;
hostfile) cmd_hostfile "$@" ;;
mpirun-args) cmd_mpirun_args "$@" ;;
link)
    host_arg "$@"
    case ${2:-} in
    up | down) ip link set "$VETH_PREFIX$I" "$2" ;;
    *) usage ;;
    esac
    ;;
shape)
    host_arg "$@"
    case ${2:-} in
    '') usage ;;
    off) nsenter -t "$PID" -n tc qdisc del dev eth0 root 2>/dev/null || : ;;
    *)
        # burst: 10 ms at the rate, at least 64 KiB (a GSO packet of the
        # veth); the queue holds 50 ms.
        bps=$(echo "$2" | awk '
            match($0, /^[0-9.]+/) { v = substr($0, 1, RLENGTH); u = tolower(substr($0, RLENGTH + 1))
              m["bit"] = 1/8; m["kbit"] = 1e3/8; m["mbit"] = 1e6/8; m["gbit"] = 1e9/8; m["tbit"] = 1e12/8
              m["kibit"] = 1024/8; m["mibit"] = 1048576/8; m["gibit"] = 1073741824/8
              m["bps"] = 1; m["kbps"] = 1e3; m["mbps"] = 1e6; m["gbps"] = 1e9
              if (u in m) printf "%d\n", v * m[u] }')
        [ "${bps:-0}" -gt 0 ] || die "bad rate '$2' (e.g. 1gbit, 100mbit)"
        burst=$((bps / 100))
        [ "$burst" -ge 65536 ] || burst=65536
        nsenter -t "$PID" -n tc qdisc replace dev eth0 root tbf rate "$2" burst "$burst" latency 50ms
        ;;
    esac
    ;;
stop) host_arg "$@" && signal_host "$I" STOP ;;
cont) host_arg "$@" && signal_host "$I" CONT ;;
procs)
    host_arg "$@"
    p=$(host_pids "$I" | tr '\n' ',')
    [ -z "$p" ] || ps -o pid=,stat=,args= -p "${p%,}"
    ;;
shm)
    host_arg "$@"
    ls -A "/proc/$PID/root/dev/shm"
    ;;
tx | rx)
    host_arg "$@"
    cat "/proc/$PID/root/sys/class/net/eth0/statistics/${cmd}_bytes"
    ;;
*) usage ;;
esac
