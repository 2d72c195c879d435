#!/bin/sh
# contrib/gpu-prepare.sh - on the Debian build machine: prepare .gpu/ so that a
# lent GPU machine (no MPI, no network) can run the CUDA tests and the
# benchmark with contrib/gpu-run.sh. See ../shared/gpu/README.md.
#   .gpu/debs     Debian 12's Open MPI 4.1.4 as .debs (unpacked there)
#   .gpu/build    a CUDA build of this tree (kernels for sm_80 and sm_90)
#   .gpu/*.sh     the shared helper scripts
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
mkdir -p .gpu/build
cd .gpu/build
[ -f Makefile ] || ../../configure --enable-werror --with-cuda=/usr/local/cuda \
    --with-cuda-arch="80 90" CFLAGS=-O2 CXXFLAGS=-O2
make -j"$(nproc)"
make -j"$(nproc)" check TESTS=   # the test programs, not run here
# What travels is limited (64 MiB): keep only what runs, stripped.
find . \( -name '*.o' -o -name '*.a' -o -name '*.lo' -o -name '.deps' \) -prune -exec rm -rf {} +
rm -f test/unit/test_emu_device  # nothing for a GPU to add to the emu tests
find src coll perf test -type f \( -name '*.so*' -o -perm -u+x \) ! -name '*.sh' \
    -exec strip --strip-unneeded {} + 2>/dev/null || true
du -sh "$top/.gpu" | sed 's/^/gpu-prepare: .gpu holds /'
echo "gpu-prepare: now run contrib/gpu-run.sh on the GPU machine, carrying .gpu"
