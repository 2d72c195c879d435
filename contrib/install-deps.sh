#!/bin/sh
# Installs what gpucoll needs to build and test on Debian 12, if missing.
# CUDA is optional: /usr/local/cuda (or configure --with-cuda=DIR) enables the
# cuda backend; without it the build is emu-only.
set -eu
pkgs="build-essential autoconf automake libtool pkg-config libopenmpi-dev openmpi-bin
libucx-dev libhwloc-dev googletest libgtest-dev clang-format valgrind"
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
