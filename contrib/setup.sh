#!/bin/sh
# contrib/setup.sh [BUILDDIR] [configure args...]
# Installs dependencies, generates configure, configures and builds gpucoll
# out of tree (default BUILDDIR: _build/default). Idempotent.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/contrib/usage.sh"
help_asked "$0" "${1:-}"
build=${1:-$top/_build/default}
[ $# -gt 0 ] && shift
"$top/contrib/install-deps.sh"
[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh)
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ]; then
    # The real nvml.h, for NVLink discovery, where the CUDA toolkit has none
    # (optional: without it NVLinks come only from description files).
    case " $* " in *" --with-nvml"*) ;; *)
        if [ ! -f /usr/local/cuda/include/nvml.h ] &&
            "$top/contrib/fetch-nvml-header.sh" "$top/_build/nvml"; then
            set -- "$@" --with-nvml="$top/_build/nvml"
        fi ;;
    esac
    # Open MPI's internal headers that the installation lacks (Debian 13 and
    # testing): from the source package of the same version.
    case " $* " in *" --with-ompi-source"*) ;; *)
        if "$top/contrib/ompi-headers-missing.sh" >/dev/null; then
            src=$("$top/contrib/ompi-source.sh" | tail -1)
            set -- "$@" --with-ompi-source="$src"
        fi ;;
    esac
    "$top/configure" --enable-werror "$@"
fi
make -j"$(nproc)"
echo "setup: built in $build"
