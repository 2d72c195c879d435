#!/bin/sh
# Installs what gpucoll needs to build and test on Debian 12, 13 or testing,
# if missing. CUDA is optional: /usr/local/cuda (or configure --with-cuda=DIR)
# enables the cuda backend; without it the build is emu-only.
# --list: prints the package list and installs nothing (contrib/rootfs.sh).
set -eu
# libpmix-dev, libevent-dev: Open MPI 5.0's internal headers include theirs;
# dpkg-dev: apt-get source (contrib/ompi-source.sh).
pkgs="build-essential autoconf automake libtool pkg-config libopenmpi-dev openmpi-bin
libucx-dev libhwloc-dev libpmix-dev libevent-dev googletest libgtest-dev clang-format
valgrind dpkg-dev python3 procps"
if [ "${1:-}" = --list ]; then
    echo $pkgs
    exit 0
fi
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
