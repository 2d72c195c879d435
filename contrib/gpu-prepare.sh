#!/bin/sh
# contrib/gpu-prepare.sh - on the Debian build machine: prepare .gpu/ so that a
# lent GPU machine (no MPI, no network) can run the CUDA tests and the
# benchmark with contrib/gpu-run.sh. See ../shared/gpu/README.md.
#   .gpu/debs     Debian 12's Open MPI 4.1.4 as .debs (unpacked there)
#   .gpu/build    a CUDA build of this tree (kernels for sm_80 and sm_90)
#   .gpu/*.sh     the shared helper scripts
#   .gpu/osu      OSU Micro-Benchmarks' blocking and nonblocking collectives
#                 (Open MPI 4.1 has no MPI_*_init, so not OSU's persistent ones) built with
#                 --enable-cuda=basic, when GPUCOLL_OSU_SRC names an OSU 7.x
#                 source tree or tarball (public; never committed here)
#   .gpu/lib      libcudart.so.13 for those OSU programs
#   .gpu/ucx      UCX 1.22 with CUDA (cuda_copy, cuda_ipc) from the PyPI wheel
#                 libucx-cu13 (downloaded with pip, or GPUCOLL_UCX_WHEEL names
#                 the .whl), stripped; the build links it (--with-ucx) so that
#                 the path between (faked) nodes hands device memory to UCX
# Then, with the device tool: run command "contrib/gpu-run.sh" carrying ".gpu".
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
shared=${GPUCOLL_SHARED:-$top/../shared}
cd "$top"
mkdir -p .gpu
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
cp "$shared"/gpu/*.sh .gpu/
[ -n "$(ls .gpu/debs/*.deb 2>/dev/null)" ] || .gpu/fetch-mpi-debs.sh .gpu/debs
"$top/contrib/install-deps.sh"
[ -x configure ] || ./autogen.sh
if [ ! -f .gpu/ucx/include/ucp/api/ucp.h ]; then
    wheel_dir=$(mktemp -d /tmp/gpucoll-ucx.XXXXXX)
    wheel=${GPUCOLL_UCX_WHEEL:-}
    if [ -z "$wheel" ]; then
        pip download -q --no-deps -d "$wheel_dir" libucx-cu13 && wheel=$(ls "$wheel_dir"/*.whl)
    fi
    if [ -n "$wheel" ] && (cd "$wheel_dir" && unzip -q -o "$wheel" 'libucx/*' 'libucx_cu13.libs/*'); then
        w=$wheel_dir/libucx
        mkdir -p .gpu/ucx/lib/ucx .gpu/ucx/bin
        for f in "$w"/lib/lib{ucp,uct,ucs,ucm,ucs_signal}.so.0.0.0 "$w"/lib/ucx/lib{uct_cuda,ucm_cuda,uct_cma}.so.0.0.0; do
            d=.gpu/ucx/lib
            case $f in */lib/ucx/*) d=.gpu/ucx/lib/ucx ;; esac
            b=$(basename "$f" .0.0)
            cp "$f" "$d/" && strip --strip-unneeded "$d/$(basename "$f")"
            ln -sf "$(basename "$f")" "$d/$b"
            ln -sf "$(basename "$f")" "$d/${b%.0}"
        done
        cp "$wheel_dir"/libucx_cu13.libs/* .gpu/ucx/lib/ 2>/dev/null || true
        cp "$w"/bin/ucx_info .gpu/ucx/bin/ && strip .gpu/ucx/bin/ucx_info
        cp -r "$w"/include .gpu/ucx/
    else
        echo "gpu-prepare: no libucx-cu13 wheel: the GPU build has no UCX (no inter-node path)" >&2
    fi
    rm -rf "$wheel_dir"
fi
ucx_arg=--without-ucx
[ -f .gpu/ucx/include/ucp/api/ucp.h ] && ucx_arg=--with-ucx=$top/.gpu/ucx
mkdir -p .gpu/build
cd .gpu/build
# The real nvml.h (NVLink discovery), fetched here: the GPU machine has no network.
nvml_arg=--without-nvml
"$top/contrib/fetch-nvml-header.sh" "$top/_build/nvml" && nvml_arg=--with-nvml=$top/_build/nvml
[ -f Makefile ] || ../../configure --enable-werror --with-cuda=/usr/local/cuda "$ucx_arg" \
    "$nvml_arg" --with-cuda-arch="80 90" CFLAGS=-O2 CXXFLAGS=-O2
make -j"$(nproc)"
make -j"$(nproc)" check TESTS=   # the test programs, not run here
# What was built (the lent machine's copy of the tree may carry no history).
(cd "$top" && git describe --always --dirty 2>/dev/null) >BUILD_COMMIT || true
# What travels is limited (64 MiB): keep only what runs, stripped.
find . \( -name '*.o' -o -name '*.a' -o -name '*.lo' -o -name '.deps' \) -prune -exec rm -rf {} +
rm -f test/unit/test_emu_device  # nothing for a GPU to add to the emu tests
find src coll perf test -type f \( -name '*.so*' -o -perm -u+x \) ! -name '*.sh' \
    -exec strip --strip-unneeded {} + 2>/dev/null || true
if [ -n "${GPUCOLL_OSU_SRC:-}" ]; then
    osu_build=$(mktemp -d /tmp/gpucoll-osu.XXXXXX)
    if [ -d "$GPUCOLL_OSU_SRC" ]; then
        cp -a "$GPUCOLL_OSU_SRC"/. "$osu_build"/
    else
        tar xf "$GPUCOLL_OSU_SRC" -C "$osu_build" --strip-components=1
    fi
    cuda=${CUDA_HOME:-/usr/local/cuda}
    # OSU links libcuda; this machine has no driver, so it links CUDA's own
    # link-time stub of it (lib64/stubs, part of the toolkit); the lent
    # machine's real driver is loaded at run time.
    (cd "$osu_build" &&
        find . -name Makefile.in -exec touch {} + && touch configure &&
        ./configure -q CC=mpicc CXX=mpicxx --enable-cuda=basic \
            --with-cuda-include="$cuda/include" --with-cuda-libpath="$cuda/lib64" \
            LDFLAGS="-L$cuda/lib64/stubs" >/dev/null &&
        make -s -j"$(nproc)" -C c/mpi/collective/blocking >/dev/null &&
        make -s -j"$(nproc)" -C c/mpi/collective/non_blocking >/dev/null)
    mkdir -p "$top/.gpu/osu" "$top/.gpu/lib"
    for t in osu_allreduce osu_bcast osu_allgather osu_reduce_scatter osu_reduce; do
        cp "$osu_build/c/mpi/collective/blocking/$t" "$top/.gpu/osu/"
    done
    for t in osu_iallreduce osu_ibcast osu_iallgather osu_ireduce_scatter osu_ireduce osu_ialltoall osu_igather; do
        cp "$osu_build/c/mpi/collective/non_blocking/$t" "$top/.gpu/osu/"
    done
    strip "$top"/.gpu/osu/*
    cp -L "$cuda/lib64/libcudart.so.13" "$top/.gpu/lib/"
    rm -rf "$osu_build"
fi
du -sh "$top/.gpu" | sed 's/^/gpu-prepare: .gpu holds /'
echo "gpu-prepare: now run contrib/gpu-run.sh on the GPU machine, carrying .gpu"
