#!/bin/bash
# contrib/gpu-run.sh - on a lent GPU machine (no MPI, no network), after
# contrib/gpu-prepare.sh on the build machine, with .gpu carried:
#
#   contrib/gpu-run.sh STEP [STEP...]
#
# Steps (each capped well under the lent machine's 10-minute command limit;
# logs under $OUT, or .gpu/out, one file per step):
#   info             machine, driver, CUDA, compute mode, MPS, topology, glibc
#   unit             CUDA unit tests (device conformance, API, reduction kernels)
#   mpi              MPI integration tests on cuda device buffers (np 1..4
#                    ranks sharing the GPU through CUDA IPC)
#   bench-allreduce  allreduce 4 B..256 MiB, np 2 and 4, staged vs each algorithm
#   bench-all        bcast, allgather, reduce_scatter_block, reduce, np 4
#   bench-kernel     reduction kernel bandwidth against device-to-device copies
#   internode        the path between nodes, nodes faked (GPUCOLL_HOSTID), UCX
#                    1.22 with CUDA from .gpu/ucx: tests and allreduce benchmark
#   osu              OSU Micro-Benchmarks (built by gpu-prepare.sh into .gpu/osu)
#                    -d cuda with validation, gpucoll's choice and all staged
#   osu-nb           OSU's nonblocking collectives -d cuda with validation
#                    (np 2 and 4): latency, pure communication time, overlap
#                    (GPUCOLL_OSU_NB: which; GPUCOLL_OSU_NP, GPUCOLL_OSU_SIZES)
#   bench-overlap    gpucoll_bench nonblocking allreduce --overlap, np 4, with
#                    the progress thread on and off
#   forms-repeat     test_forms between faked nodes (2+1+1, progress thread
#                    auto, UCX_TLS=tcp,self) GPUCOLL_FORMS_REPEAT times (default
#                    20, ~4 s each), counting crashes: the heap corruption of
#                    the ninth session (sbrk under UCX's hooks) crashed 12 of 67
#                    such runs before its fix (docs/performance.md)
#   host-overhead    what gpucoll costs a host-buffer allreduce (np 2, 8 B-1 KiB,
#                    perf/gpucoll_host_overhead): heap buffers, then mmap'd ones
#                    (what large mallocs give) with coll_gpucoll_host_cache auto,
#                    on and off (off: a driver query per buffer per call); about
#                    3 minutes
#   topo             gpucoll_topo on the live machine (hwloc + NVML: the GPU,
#                    its NVLinks, NICs, JSON), beside nvidia-smi topo -m; the
#                    topology unit tests; the accelerated path's topology
#                    line at np 3 (GPU bus id found in the discovered machine)
#
# Durations: info + unit + mpi took 32 s on an H100 (2026-11-22);
# bench-allreduce (np 2 and 4, 3 repeats) 280 s; bench-all is estimated from
# that at ~4 min (4 collectives per run, 2 repeats); osu at ~4 min (16 runs,
# each capped at 100 s); bench-kernel under a minute; osu-nb (7 programs,
# np 2 and 4, 8 B-16 MiB) 452 s without MPS, 3 programs at np 4 with MPS
# about 90 s; bench-overlap 5-15 s. A step that runs past
# GPUCOLL_STEP_TIMEOUT is cut and reported.
#   timeline         where the time of small calls goes: 8 B per rank
#                    allreduce, bcast and allgather, np 2 and 4, gpucoll's
#                    choice and staged, with coll_gpucoll_timing (each rank's
#                    per-step table at finalize) (GPUCOLL_TIMELINE_NP)
#   calibrate        the measurement a selection table comes from: every
#                    algorithm and staged, device columns only, allreduce,
#                    bcast, allgather and reduce_scatter_block at 8 B-256 MiB,
#                    np GPUCOLL_BENCH_NP (default 2 4), one run each
#                    (GPUCOLL_BENCH_REPEATS); the tables also land in
#                    calibrate*.txt in the logs, and the selection table
#                    contrib/selection-table.py makes of them (with the
#                    one-kernel step's tables where it ran before, in the
#                    same MPS mode) in selection-table*.txt: the file
#                    coll_gpucoll_selection_file takes (docs/tuning.md)
#   one-kernel       the one-kernel allreduce (small messages in one launch
#                    per rank) against one-shot and staged, 8 B-256 KiB, np 2
#                    and 4, results validated, device columns only; its
#                    per-step table at 8 B; with MPS (mps-on) it runs, without
#                    it a forced one_kernel must fall back (one line says which)
#   all              every step above up to osu, in that order
#   mps-on, mps-off  start / stop the MPS daemon for the steps that follow
#                    (ranks sharing the GPU then run concurrently instead of
#                    time-slicing: say which mode a figure used)
#
# GPUCOLL_STEP_TIMEOUT (seconds, default 480) caps each step; a step cut by it
# reports TIMEOUT and the next step still runs.
set -u
case ${1:-} in
-h | --help | help)
    # This header, before anything needs .gpu/ (it may not be prepared yet).
    sed -n '2,/^set -u/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
    ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# Logs: one file per step in $out; with the device tool's $OUT (which returns
# at most 8 files), they are packed into one $OUT/gpu-logs-*.tgz at the end.
if [ -n "${OUT:-}" ]; then
    out=$(mktemp -d /tmp/gpucoll-logs.XXXXXX)
else
    out=$top/.gpu/out
fi
mkdir -p "$out"
B=$top/.gpu/build
step_timeout=${GPUCOLL_STEP_TIMEOUT:-480}
[ $# -gt 0 ] || set -- info
[ "$1" = all ] && set -- info unit mpi bench-allreduce bench-all bench-kernel osu

# shellcheck disable=SC1091
source .gpu/mpi-env.sh .gpu/debs /opt/debmpi >"$out/mpi-env.log" 2>&1 || {
    cat "$out/mpi-env.log"
    exit 1
}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LD_LIBRARY_PATH=$B/src/.libs:$top/.gpu/lib:$LD_LIBRARY_PATH
# UCX 1.22 with CUDA (the build links it), ahead of the Debian UCX 1.13 that
# the Open MPI .debs bring.
[ -d "$top/.gpu/ucx/lib" ] && LD_LIBRARY_PATH=$top/.gpu/ucx/lib:$LD_LIBRARY_PATH
# Open MPI finds the component in the build tree (keep the default path tokens).
export OMPI_MCA_mca_base_component_path="$B/coll/.libs:SYS_DEFAULT:USER_DEFAULT"
export GPUCOLL_BUILDDIR=$B GPUCOLL_SRCDIR=$top MPIRUN=mpirun GPUCOLL_TEST_DEVICE=cuda
# contrib/bench.sh's result files (CSV) come back with the logs; no plots here
# (no network for matplotlib): contrib/plot-bench.py makes them afterwards.
export GPUCOLL_BENCH_RESULTS=$out/bench-results GPUCOLL_BENCH_PLOTS=0

step_info() {
    date -u
    echo "build: $(cat "$B/BUILD_COMMIT" 2>/dev/null || echo unknown) (contrib/gpu-prepare.sh)"
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,compute_mode,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv
    nvidia-smi | sed -n '1,4p'
    echo "MPS: $(pgrep -f nvidia-cuda-mps-control >/dev/null && echo running || echo 'not running')" \
        "(control binary: $(command -v nvidia-cuda-mps-control || echo absent))"
    nvidia-smi topo -m 2>&1 | head -20
    grep -E '^(PRETTY_NAME|VERSION_ID)' /etc/os-release
    ldd --version | head -1
    nproc
    mpirun --version | head -1
    echo "nsys: $(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1 || true)"
    ompi_info --parsable --param coll gpucoll --level 9 2>&1 | grep -c 'mca:coll:gpucoll:param' |
        sed 's/^/gpucoll MCA parameters visible: /'
}

step_unit() {
    local rc=0 t
    for t in test_cuda_device test_api test_reduce_ops test_intra; do
        [ -x "$B/test/unit/$t" ] || continue
        echo "== $t"
        GPUCOLL_DEVICE=cuda "$B/test/unit/$t" --gtest_brief=1 2>&1 | tail -n 40 || rc=1
        [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    done
    return $rc
}

step_mpi() {
    local rc=0 s
    for s in ${GPUCOLL_MPI_TESTS:-collectives mixed userop_ddt lifecycle robustness stress forms intercomm internode}; do
        local cap=150
        [ "$s" = internode ] || [ "$s" = forms ] && cap=240
        if timeout "$cap" sh "test/mpi/$s.sh" >"$out/mpi-$s.txt" 2>&1; then
            echo "PASS $s"
        else
            echo "FAIL $s (rc $?)"
            tail -n 25 "$out/mpi-$s.txt"
            rc=1
        fi
    done
    return $rc
}

# GPUCOLL_BENCH_NP (default "2 4"), GPUCOLL_BENCH_SIZES (8:256M),
# GPUCOLL_BENCH_REPEATS (3), GPUCOLL_BENCH_ALGS, GPUCOLL_BENCH_MPIRUN_ARGS
# (e.g. "--mca coll_gpucoll_flags device") narrow or vary the bench steps.
step_bench_allreduce() {
    local np rc=0
    for np in ${GPUCOLL_BENCH_NP:-2 4}; do
        contrib/bench.sh -q -b "$B" -d cuda -n "$np" -c allreduce -m "${GPUCOLL_BENCH_SIZES:-8:256M}" \
            -r "${GPUCOLL_BENCH_REPEATS:-3}" -T 0.3 -a "${GPUCOLL_BENCH_ALGS:-staged,one_shot,two_shot,ring}" \
            -x "${GPUCOLL_BENCH_MPIRUN_ARGS:-}" || rc=1
    done
    return $rc
}

step_bench_all() {
    local np rc=0
    for np in ${GPUCOLL_BENCH_NP:-4}; do
        contrib/bench.sh -q -b "$B" -d cuda -n "$np" -c bcast,allgather,reduce_scatter_block,reduce \
            -m "${GPUCOLL_BENCH_SIZES:-8:256M}" -r "${GPUCOLL_BENCH_REPEATS:-2}" -T 0.3 \
            -a "${GPUCOLL_BENCH_ALGS:-staged,auto}" -x "${GPUCOLL_BENCH_MPIRUN_ARGS:-}" || rc=1
    done
    return $rc
}

step_timeline() {
    local np coll alg rc=0
    for np in ${GPUCOLL_TIMELINE_NP:-2 4}; do
        for coll in allreduce bcast allgather; do
            local bytes=8
            [ "$coll" = allgather ] && bytes=$((8 * np))
            for alg in auto staged; do
                echo "== $coll np $np, 8 B per rank, algorithm $alg"
                timeout 90 mpirun -np "$np" --oversubscribe --mca coll_gpucoll_device cuda \
                    --mca coll_gpucoll_timing 1 --mca "coll_gpucoll_${coll}_algorithm" "$alg" \
                    "$B/perf/gpucoll_bench" "$coll" -d cuda -m "$bytes:$bytes" -i 5000 -w 500 \
                    -T 10 2>&1 | grep -v '^# *[A-Za-z]' || rc=1
            done
        done
    done
    return $rc
}

step_one_kernel() {
    local np rc=0
    for np in ${GPUCOLL_BENCH_NP:-2 4}; do
        contrib/bench.sh -q -H -b "$B" -d cuda -n "$np" -c allreduce -m "${GPUCOLL_BENCH_SIZES:-8:256K}" \
            -r "${GPUCOLL_BENCH_REPEATS:-3}" -T 0.2 -a staged,one_shot,one_kernel -- -c || rc=1
        echo "== one_kernel forced, np $np, 8 B, coll_gpucoll_timing"
        timeout 90 mpirun -np "$np" --oversubscribe --mca coll_gpucoll_device cuda \
            --mca coll_gpucoll_timing 1 --mca coll_gpucoll_allreduce_algorithm one_kernel \
            --mca coll_gpucoll_verbose 1 "$B/perf/gpucoll_bench" allreduce -d cuda -m 8:8 \
            -i 5000 -w 500 -T 10 -c 2>&1 | grep -v '^# *[A-Za-z]' | grep -v 'topology' || rc=1
    done
    return $rc
}

step_calibrate() {
    local np rc=0 f spec
    for np in ${GPUCOLL_BENCH_NP:-2 4}; do
        f=$out/calibrate-np$np${GPUCOLL_LOG_SUFFIX:-}.txt
        : >"$f"
        # collectives, then the algorithms measured for them
        for spec in "allreduce staged,auto,one_shot,two_shot,ring" "bcast staged,auto,direct,chain" \
            "allgather,reduce_scatter_block staged,auto,direct,ring"; do
            # shellcheck disable=SC2086 # spec: two words
            set -- $spec
            contrib/bench.sh -q -H -b "$B" -d cuda -n "$np" -c "$1" -m "${GPUCOLL_BENCH_SIZES:-8:256M}" \
                -r "${GPUCOLL_BENCH_REPEATS:-1}" -T "${GPUCOLL_CALIBRATE_T:-0.2}" -a "$2" |
                tee -a "$f" || rc=1
        done
    done
    # The measured selection table, for the sharing mode of this run (every
    # rank on the one GPU: with MPS or without).
    local sharing=shared-no-mps sfx=${GPUCOLL_LOG_SUFFIX:-} inputs=()
    pgrep -f nvidia-cuda-mps-control >/dev/null && sharing=shared-mps
    for np in ${GPUCOLL_BENCH_NP:-2 4}; do inputs+=("$out/calibrate-np$np$sfx.txt"); done
    [ -f "$out/one-kernel$sfx.log" ] && inputs+=("$out/one-kernel$sfx.log")
    if python3 contrib/selection-table.py --backend cuda --sharing "$sharing" \
        -o "$out/selection-table$sfx.txt" "${inputs[@]}"; then
        echo "== selection table ($sharing): $out/selection-table$sfx.txt"
        grep -v '^#' "$out/selection-table$sfx.txt"
        python3 contrib/selection-table.py --check "$out/selection-table$sfx.txt" \
            --sharing "$sharing" "${inputs[@]}" || true
    else
        echo "contrib/selection-table.py failed"
        rc=1
    fi
    return $rc
}

step_bench_kernel() {
    "$B/perf/gpucoll_kernel_bench" -d cuda -m 1M:1G -i 20 2>&1 || {
        echo "gpucoll_kernel_bench missing or failed"
        return 1
    }
}

step_osu() {
    local osu=$top/.gpu/osu rc=0 t np comp
    [ -x "$osu/osu_allreduce" ] || {
        echo "no OSU build in .gpu/osu (gpu-prepare.sh builds it when its source is given)"
        return 1
    }
    # gpucoll's choice against every collective staged through host memory
    # (what a non-CUDA-aware Open MPI would need; without gpucoll, Debian's
    # Open MPI segfaults on device buffers).
    local staged=() c
    for c in allreduce bcast allgather reduce_scatter reduce_scatter_block reduce; do
        staged+=(--mca "coll_gpucoll_${c}_algorithm" staged)
    done
    for t in osu_allreduce osu_bcast osu_allgather osu_reduce_scatter; do
        for np in 2 4; do
            for how in auto staged; do
                local mca=(--mca coll_gpucoll_device cuda)
                [ $how = staged ] && mca+=("${staged[@]}")
                echo "== $t np $np gpucoll $how"
                timeout 100 mpirun -np "$np" --oversubscribe "${mca[@]}" \
                    "$osu/$t" -d cuda -c -m 8:67108864 -i 50 -x 5 2>&1 | tail -n 30 || rc=1
            done
        done
    done
    return $rc
}

step_bench_overlap() {
    local pt rc=0
    for pt in on off; do
        echo "== coll_gpucoll_progress_thread $pt"
        timeout 200 mpirun -np "${GPUCOLL_BENCH_NP:-4}" --oversubscribe --mca coll_gpucoll_device cuda \
            --mca coll_gpucoll_progress_thread $pt "$B/perf/gpucoll_bench" allreduce -d cuda \
            -f nonblocking --overlap -m "${GPUCOLL_BENCH_SIZES:-4K:64M}" -T 0.3 2>&1 || rc=1
    done
    return $rc
}

# OSU's nonblocking benchmarks: the accelerated ones (allreduce, bcast,
# allgather, reduce_scatter, reduce) and two staged ones (alltoall, gather),
# with validation; the overlap column is OSU's (CPU compute of the pure
# communication time, no MPI_Test in between).
step_osu_nb() {
    local osu=$top/.gpu/osu rc=0 t np
    [ -x "$osu/osu_iallreduce" ] || {
        echo "no OSU nonblocking build in .gpu/osu (gpu-prepare.sh builds it when its source is given)"
        return 1
    }
    for t in ${GPUCOLL_OSU_NB:-osu_iallreduce osu_ibcast osu_iallgather osu_ireduce_scatter osu_ireduce osu_ialltoall osu_igather}; do
        for np in ${GPUCOLL_OSU_NP:-2 4}; do
            echo "== $t np $np ${GPUCOLL_BENCH_MPIRUN_ARGS:-}"
            # shellcheck disable=SC2086
            timeout 100 mpirun -np "$np" --oversubscribe --mca coll_gpucoll_device cuda \
                ${GPUCOLL_BENCH_MPIRUN_ARGS:-} "$osu/$t" -d cuda -c -m "${GPUCOLL_OSU_SIZES:-8:67108864}" \
                -i 20 -x 3 2>&1 | tail -n 30 || rc=1
        done
    done
    return $rc
}

# Between faked nodes (GPUCOLL_HOSTID) with UCX 1.22 from the libucx-cu13
# wheel (.gpu/ucx, linked by the build), ahead of the Debian UCX 1.13 the
# Open MPI .debs bring: tests (2x2, 2x1, 2+1+1) with UCX's own transports
# (cuda_copy / cuda_ipc: device memory straight to UCX) and with tcp only
# (device memory staged through pinned host memory), then the benchmark.
step_internode() {
    local rc=0 shape tls wrap
    [ -d "$top/.gpu/ucx/lib" ] || { echo "no .gpu/ucx (contrib/gpu-prepare.sh)"; return 1; }
    "$top/.gpu/ucx/bin/ucx_info" -v | head -2
    for tls in all tcp,self; do
        for shape in "2 2" "1 1" "2 1 1"; do
            local np=0 c
            for c in $shape; do np=$((np + c)); done
            wrap='r=$OMPI_COMM_WORLD_RANK; n=0; for c in '"$shape"'; do [ "$r" -lt "$c" ] && break;
                r=$((r - c)); n=$((n + 1)); done; export GPUCOLL_HOSTID=fake$n; exec "$0" "$@"'
            echo "== test_internode, nodes of $shape ranks, UCX_TLS=$tls"
            timeout 120 mpirun -np "$np" --oversubscribe --mca coll_gpucoll_device cuda \
                --mca coll_gpucoll_verbose 1 -x LD_LIBRARY_PATH -x "UCX_TLS=$tls" \
                sh -c "$wrap" "$B/test/mpi/test_internode" 2>&1 |
                grep -E 'between nodes|off between|test_internode|FAIL|rror' | sort | uniq -c || rc=1
        done
    done
    for tls in all tcp,self; do
        UCX_TLS=$tls contrib/bench.sh -q -b "$B" -d cuda -N "${GPUCOLL_BENCH_SHAPES:-2x2,2x1}" \
            -c allreduce -m "${GPUCOLL_BENCH_SIZES:-4K:64M}" -r "${GPUCOLL_BENCH_REPEATS:-2}" \
            -T 0.3 -a auto,staged -x "-x LD_LIBRARY_PATH" || rc=1
    done
    return $rc
}

step_forms_repeat() {
    local i fails=0 n=${GPUCOLL_FORMS_REPEAT:-20}
    local wrap='r=$OMPI_COMM_WORLD_RANK; n=0; for c in 2 1 1; do [ "$r" -lt "$c" ] && break;
        r=$((r - c)); n=$((n + 1)); done; export GPUCOLL_HOSTID=fake$n; exec "$0" "$@"'
    for i in $(seq 1 "$n"); do
        local rc=0
        timeout -k 5 40 mpirun -np 4 --oversubscribe --mca coll_gpucoll_device cuda \
            --mca coll_gpucoll_progress_thread auto -x LD_LIBRARY_PATH -x UCX_TLS=tcp,self \
            -x UCX_NET_DEVICES=lo sh -c "$wrap" "$B/test/mpi/test_forms" --between-nodes --quick \
            >"$out/forms-repeat-$i.txt" 2>&1 || rc=$?
        if [ "$rc" -ne 0 ]; then
            fails=$((fails + 1))
            echo "run $i FAILED with status $rc (124/137: cut at 40 s, a hang; 139: a crash):"
            grep -E 'Signal|FAIL|rror' "$out/forms-repeat-$i.txt" | head -5
        else
            rm -f "$out/forms-repeat-$i.txt"
        fi
    done
    echo "forms-repeat: $fails of $n runs failed"
    [ "$fails" -eq 0 ]
}

step_host_overhead() {
    local rc=0 args="-c allreduce -m 8:1024 -r 11 -i 10000"
    local run="timeout 150 mpirun -np 2 --mca coll_gpucoll_device cuda"
    echo "== heap buffers, host_cache auto"
    $run --mca coll_gpucoll_host_cache auto "$B/perf/gpucoll_host_overhead" $args || rc=1
    echo "== mmap'd buffers, host_cache auto"
    $run --mca coll_gpucoll_host_cache auto "$B/perf/gpucoll_host_overhead" $args -M || rc=1
    echo "== mmap'd buffers, host_cache on (installs UCX's hooks if nobody has)"
    $run --mca coll_gpucoll_host_cache on "$B/perf/gpucoll_host_overhead" $args -M || rc=1
    echo "== mmap'd buffers, host_cache off (a driver query per buffer per call)"
    $run --mca coll_gpucoll_host_cache off "$B/perf/gpucoll_host_overhead" $args -M || rc=1
    return $rc
}

step_topo() {
    local rc=0
    nvidia-smi topo -m 2>&1 | head -n 20
    "$B/tools/gpucoll_topo" || rc=1
    "$B/tools/gpucoll_topo" --json >"$out/topo.json" || rc=1
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("gpus:", len(d["gpus"]), "nvlinks from:", d["nvlinks_source"])' "$out/topo.json" || rc=1
    GPUCOLL_SRCDIR=$top "$B/test/unit/test_topo" --gtest_brief=1 || rc=1
    # np 3: the smallest node communicator that looks at the topology.
    timeout 120 mpirun -np 3 --oversubscribe --mca coll_gpucoll_device cuda \
        --mca coll_gpucoll_verbose 1 "$B/perf/gpucoll_bench" allreduce -m 1M:1M -i 3 -w 1 -c 2>&1 | grep -E 'topology|PASS|FAIL|accelerated' | head -n 20 || rc=1
    return $rc
}

mps_mode() {
    if [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && [ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ]; then
        echo "MPS on"
    else
        echo "MPS off"
    fi
}

overall=0
for step in "$@"; do
    case $step in
    mps-on)
        export CUDA_MPS_PIPE_DIRECTORY=/tmp/gpucoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/gpucoll-mps/log
        mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
        nvidia-cuda-mps-control -d && sleep 1
        export GPUCOLL_LOG_SUFFIX=-mps
        echo "######## $(mps_mode) (nvidia-cuda-mps-control -d)"
        continue
        ;;
    mps-off)
        echo quit | nvidia-cuda-mps-control 2>/dev/null
        sleep 1
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY GPUCOLL_LOG_SUFFIX
        echo "######## $(mps_mode)"
        continue
        ;;
    esac
    fn=step_${step//-/_}
    if ! declare -F "$fn" >/dev/null; then
        echo "gpu-run: unknown step '$step' (see the header of $0)" >&2
        overall=2
        continue
    fi
    start=$(date +%s)
    echo "######## step $step (cap ${step_timeout}s, $(mps_mode))"
    # A subshell per step, so that a stuck step can be cut off by its cap.
    (
        export -f "$fn"
        export B out top
        timeout --kill-after=10 "$step_timeout" bash -o pipefail -c "$fn"
    ) 2>&1 | tee "$out/$step${GPUCOLL_LOG_SUFFIX:-}.log"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 124 ] && echo "TIMEOUT: step $step cut after ${step_timeout}s" | tee -a "$out/$step${GPUCOLL_LOG_SUFFIX:-}.log"
    echo "######## step $step: rc $rc, $(($(date +%s) - start)) s" | tee -a "$out/$step${GPUCOLL_LOG_SUFFIX:-}.log"
    [ "$rc" -eq 0 ] || overall=1
done
if [ -n "${OUT:-}" ]; then
    tar czf "$OUT/gpu-logs-$(date +%H%M%S).tgz" -C "$out" . && rm -rf "$out"
fi
exit $overall
