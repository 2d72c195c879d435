#!/bin/bash
# contrib/gpu-run.sh - on a lent GPU machine (after contrib/gpu-prepare.sh on
# the build machine, with .gpu carried): the CUDA unit tests, the MPI tests on
# cuda device buffers (several ranks share the GPU through CUDA IPC) and the
# benchmark. Logs go to $OUT (or .gpu/out) for the performance doc.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out=${OUT:-$top/.gpu/out}
mkdir -p "$out"
B=$top/.gpu/build
# shellcheck disable=SC1091
source .gpu/mpi-env.sh .gpu/debs /opt/debmpi || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LD_LIBRARY_PATH=$B/src/.libs:$LD_LIBRARY_PATH
{
    date -u
    nvidia-smi -L
    git log -1 --format='commit %H' 2>/dev/null || true
} | tee "$out/machine.txt"

rc=0
echo "== unit tests" | tee "$out/unit.log"
for t in test_cuda_device test_api test_intra test_reduce_ops; do  # test_intra: emu by design
    GPUCOLL_DEVICE=cuda "$B/test/unit/$t" >>"$out/unit.log" 2>&1 || rc=1
    tail -n 3 "$out/unit.log"
done

echo "== MPI tests on cuda device buffers" | tee "$out/mpi.log"
export GPUCOLL_BUILDDIR=$B GPUCOLL_SRCDIR=$top MPIRUN=mpirun GPUCOLL_TEST_DEVICE=cuda
for s in collectives mixed userop_ddt lifecycle robustness stress; do
    if sh "test/mpi/$s.sh" >>"$out/mpi.log" 2>&1; then echo "PASS $s"; else echo "FAIL $s"; fi
done | tee -a "$out/mpi.log"
grep -q '^FAIL' "$out/mpi.log" && rc=1

echo "== benchmark" | tee "$out/bench.log"
for np in 2 4; do
    contrib/bench.sh -b "$B" -d cuda -n "$np" -c allreduce -m 4:256M -r 3 \
        -a staged,one_shot,two_shot,ring >>"$out/bench.log" 2>&1 || rc=1
done
contrib/bench.sh -b "$B" -d cuda -n 4 -c bcast,allgather,reduce_scatter_block,reduce \
    -m 4K:256M -r 3 -a staged,auto >>"$out/bench.log" 2>&1 || rc=1
grep -A40 '# comparison' "$out/bench.log" | head -80
exit $rc
