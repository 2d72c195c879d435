#!/bin/sh
# contrib/rootfs.sh SUITE [COMMAND...]: a Debian root filesystem with the
# Open MPI of SUITE (trixie: 5.0, testing/forky: 6.0) and everything gpucoll
# needs to build and test, made with debootstrap from the mirror this
# machine's apt already uses, and kept in a cache directory outside the clone
# ($GPUCOLL_CACHE, default /var/cache/gpucoll) between runs. It is made when
# missing or when its package list changed; otherwise reused as it is.
#
# With COMMAND, runs it inside the root filesystem (chroot, as root) with
# /proc, /sys, /dev and a private /dev/shm mounted, and this source tree
# bind-mounted at /src; mounts are undone when the command ends.
#   contrib/rootfs.sh trixie sh -c 'cd /src && contrib/test.sh /tmp/b'
# Without COMMAND, prints the root filesystem's path.
# Needs root, debootstrap (installed if missing) and the package mirror.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/usage.sh"
need_suite "$0" "${1:-}"
suite=$1
shift
cache=${GPUCOLL_CACHE:-/var/cache/gpucoll}
root=$cache/rootfs/$suite
# What contrib/install-deps.sh installs, and ca-certificates.
pkgs="$("$top/contrib/install-deps.sh" --list) ca-certificates"
stamp="pkgs: $(echo $pkgs)"

[ "$(id -u)" -eq 0 ] || { echo "rootfs: needs root (chroot, mounts)" >&2; exit 77; }

# The mirror apt uses here (deb822 or one-line sources), so that nothing
# else is reached.
mirror() {
    {
        sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null
        sed -n 's/^deb  *\(\[[^]]*\] *\)\{0,1\}\([^ ]*\).*/\2/p' /etc/apt/sources.list 2>/dev/null
    } | grep -v -e security -e '^$' | grep '/debian/\{0,1\}$' | head -1
}

make_root() {
    command -v debootstrap >/dev/null || {
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2
    }
    url=$(mirror)
    [ -n "$url" ] || { echo "rootfs: no Debian mirror found in apt's sources" >&2; exit 1; }
    tmp=$root.new
    rm -rf "$tmp"
    mkdir -p "$(dirname "$root")"
    echo "rootfs: debootstrap $suite from $url into $root (about 6 minutes)" >&2
    debootstrap --variant=minbase --include="$(echo $pkgs | tr ' ' ,)" \
        "$suite" "$tmp" "$url" >"$cache/rootfs/$suite.log" 2>&1 || {
        tail -20 "$cache/rootfs/$suite.log" >&2
        echo "rootfs: debootstrap $suite failed (log: $cache/rootfs/$suite.log)" >&2
        exit 1
    }
    # deb-src, for Open MPI's headers that Debian's -dev package lacks
    # (contrib/ompi-source.sh). Where the suite's own source is not served
    # (testing's 6.0.0~rc2), the script falls back to trixie's.
    {
        printf 'deb %s %s main\ndeb-src %s %s main\n' "$url" "$suite" "$url" "$suite"
        [ "$suite" = trixie ] || printf 'deb-src %s trixie main\n' "$url"
    } >"$tmp/etc/apt/sources.list"
    # The mirror may serve a suite whose Release file has passed its
    # Valid-Until date (a frozen testing): apt would refuse to update.
    echo 'Acquire::Check-Valid-Until "false";' >"$tmp/etc/apt/apt.conf.d/99gpucoll"
    echo "$stamp" >"$tmp/.gpucoll-rootfs"
    rm -rf "$root"
    mv "$tmp" "$root"
}

[ -f "$root/.gpucoll-rootfs" ] && [ "$(cat "$root/.gpucoll-rootfs")" = "$stamp" ] || make_root

[ $# -gt 0 ] || { echo "$root"; exit 0; }

# Runs COMMAND in a private mount namespace: the mounts vanish with it, even
# when it is killed.
exec unshare --mount --propagation private sh -eu -c '
root=$1 top=$2
shift 2
# The root a mount point of its own: unshare --mount inside (the namespace
# hosts of test/cluster) makes / private, which a plain directory refuses.
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
mkdir -p "$root/src"
mount --bind "$top" "$root/src"
# The namespace hosts of test/cluster share the network stack of this
# machine (bridges, veths): their claims must be seen inside and outside.
mkdir -p /run/gpucoll-cluster "$root/run/gpucoll-cluster"
mount --bind /run/gpucoll-cluster "$root/run/gpucoll-cluster"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || :
exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 CI="${CI:-}" "$@"
' rootfs "$root" "$top" "$@"
