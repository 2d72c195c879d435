#!/bin/sh
# contrib/setup.sh [BUILDDIR] [configure args...]
# Installs dependencies, generates configure, configures and builds gpucoll
# out of tree (default BUILDDIR: _build/default). Idempotent.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/_build/default}
[ $# -gt 0 ] && shift
"$top/contrib/install-deps.sh"
[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh)
mkdir -p "$build"
cd "$build"
[ -f Makefile ] || "$top/configure" --enable-werror "$@"
make -j"$(nproc)"
echo "setup: built in $build"
