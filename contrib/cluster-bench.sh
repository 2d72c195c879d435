#!/usr/bin/env bash
# contrib/cluster-bench.sh - allreduce between real (namespace) hosts with
# each host's link shaped, side by side: device buffers on gpucoll's path
# between nodes (auto: hierarchical), device buffers staged through host
# memory (coll_gpucoll_allreduce_algorithm staged), host buffers with the
# component off (Open MPI alone, its tcp BTL). For each size it reports the
# time against the link-limited bound (the bytes each host must send,
# 2(N-1)/N x S for N hosts, at the link's rate) and the bytes each host's
# eth0 really sent per call (the kernel's tx_bytes, an independent count:
# the difference between a run of I1 and one of I2 calls, so that the
# job's setup traffic cancels out) against 2(N-1)/N x S.
# Needs root (test/cluster/cluster.sh) and a build with UCX; emu device
# buffers. A benchmark, not a test: it prints tables and writes a CSV.
#
#   contrib/cluster-bench.sh                       # 2x1 and 4x1, 1 and 10 Gbit/s
#   contrib/cluster-bench.sh -s 2x2 -R 1gbit -m 16M:64M
set -u

usage() {
    cat <<'EOF'
usage: contrib/cluster-bench.sh [options]
  -s SHAPES    comma list of host shapes: HOSTSxRANKS (2x1: 2 hosts, 1 rank each)
               or sizes joined by + (2+1+1) (default 2x1,4x1)
  -R RATES     comma list of link rates for tc tbf on every host's egress:
               100mbit, 1gbit, 10gbit, or off (default 1gbit,10gbit)
  -m MIN:MAX   sizes in bytes, K/M suffixes, x4 steps (default 1M:64M)
  -I I1:I2     calls per measurement: runs of I1 and of I2 timed calls (one
               warm-up each); bytes per call = tx difference / (I2 - I1), the
               time is the I2 run's (default 2:4)
  -v VARIANTS  comma list of hier (gpucoll, auto), staged, off (default all)
  -b BUILDDIR  build tree (default: _build/default next to this script)
  -o FILE      CSV of the results (default BUILDDIR/cluster-bench-DATE.csv)
  -h           this help
Environment: GPUCOLL_CLUSTER_ID (default: a free one, cluster.sh claim).
EOF
}

top=$(cd "$(dirname "$0")/.." && pwd)
shapes=2x1,4x1 rates=1gbit,10gbit sizes=1M:64M iters=2:4 variants=hier,staged,off
B=$top/_build/default out=
while getopts "s:R:m:I:v:b:o:h" o; do
    case $o in
    s) shapes=$OPTARG ;;
    R) rates=$OPTARG ;;
    m) sizes=$OPTARG ;;
    I) iters=$OPTARG ;;
    v) variants=$OPTARG ;;
    b) B=$(cd "$OPTARG" && pwd) || exit 2 ;;
    o) out=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
[ -x "$B/perf/gpucoll_bench" ] || { echo "cluster-bench.sh: no $B/perf/gpucoll_bench (build first)" >&2; exit 2; }
grep -q '^#define GPUCOLL_HAVE_UCX 1' "$B/config.h" ||
    { echo "cluster-bench.sh: $B was built without UCX" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "cluster-bench.sh: needs root (network namespaces)" >&2; exit 2; }
i1=${iters%%:*} i2=${iters#*:}
[ "$i2" -gt "$i1" ] 2>/dev/null || { echo "cluster-bench.sh: -I I1:I2 with I2 > I1" >&2; exit 2; }
out=${out:-$B/cluster-bench-$(date -u +%Y%m%d-%H%M%S).csv}

bytes() { # 4K -> 4096
    case $1 in
    *K) echo $((${1%K} * 1024)) ;;
    *M) echo $((${1%M} * 1048576)) ;;
    *G) echo $((${1%G} * 1073741824)) ;;
    *) echo "$1" ;;
    esac
}
bits_per_s() { # 1gbit -> 1000000000; off -> 0
    case $1 in
    *gbit) echo $((${1%gbit} * 1000000000)) ;;
    *mbit) echo $((${1%mbit} * 1000000)) ;;
    off) echo 0 ;;
    *) echo "cluster-bench.sh: rate '$1' (100mbit, 1gbit, 10gbit, off)" >&2; exit 2 ;;
    esac
}
shape_hosts() { case $1 in *x*) echo "${1%x*}" ;; *) echo "$1" | tr '+' '\n' | wc -l ;; esac; }
shape_np() {
    case $1 in
    *x*) echo $((${1%x*} * ${1#*x})) ;;
    *) echo $((${1//+/ + })) ;;
    esac
}

cluster=$top/test/cluster/cluster.sh
GPUCOLL_CLUSTER_ID=${GPUCOLL_CLUSTER_ID:-$("$cluster" claim $$)} || exit 1
export GPUCOLL_CLUSTER_ID GPUCOLL_CLUSTER_MPIRUN=mpirun
compdir=$(mktemp -d)
ln -s "$B/coll/.libs/mca_coll_gpucoll.so" "$compdir/"
trap '"$cluster" down >/dev/null 2>&1; rm -rf "$compdir"' EXIT
trap 'exit 130' INT TERM HUP
export OMPI_MCA_mca_base_component_path=$compdir:SYS_DEFAULT:USER_DEFAULT
export LD_LIBRARY_PATH=$B/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# run SHAPE VARIANT SIZE ITERS: prints "LATENCY_US TX0 TX1 ..." (the
# benchmark's mean latency over ranks, the bytes each host sent).
run() {
    local shape=$1 variant=$2 size=$3 n=$4 h tx0 tx1 lat args=()
    case $variant in
    hier) args=(--mca coll_gpucoll_device emu) ;;
    staged) args=(--mca coll_gpucoll_device emu --mca coll_gpucoll_allreduce_algorithm staged) ;;
    off) args=(--mca coll ^gpucoll) ;;
    esac
    local dev=emu
    [ "$variant" = off ] && dev=host
    tx0=$(for h in $("$cluster" hosts); do "$cluster" tx "$h"; done | tr '\n' ' ')
    # shellcheck disable=SC2046 # words
    lat=$("$cluster" exec gc-h0 mpirun --allow-run-as-root --oversubscribe \
        $("$cluster" mpirun-args "$shape") -np "$(shape_np "$shape")" -x UCX_TLS=tcp,self \
        "${args[@]}" "$B/perf/gpucoll_bench" allreduce -d "$dev" -m "$size:$size" -i "$n" -w 1 \
        -T 1000 -t int8 2>&1 | awk '$1 ~ /^[0-9]+$/ && NF > 5 {print $3}')
    tx1=$(for h in $("$cluster" hosts); do "$cluster" tx "$h"; done | tr '\n' ' ')
    echo "${lat:-nan} $tx0 $tx1"
}

echo "shape,rate,variant,size,latency_us,bound_us,time_ratio,max_host_B_per_call,wire_bound_B,bytes_ratio" >"$out"
IFS=, read -r -a shape_list <<<"$shapes"
IFS=, read -r -a rate_list <<<"$rates"
IFS=, read -r -a variant_list <<<"$variants"
lo=$(bytes "${sizes%%:*}") hi=$(bytes "${sizes#*:}")
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$top" describe --always --dirty 2>/dev/null), build $B"
echo "# allreduce (int8, sum), emu device buffers (off: host buffers), UCX over tcp on each host's eth0"
for shape in "${shape_list[@]}"; do
    hosts=$(shape_hosts "$shape")
    "$cluster" up "$hosts" >/dev/null || { echo "cluster-bench.sh: cluster.sh up $hosts failed" >&2; exit 1; }
    for rate in "${rate_list[@]}"; do
        bps=$(bits_per_s "$rate") || exit 2
        for h in $("$cluster" hosts); do "$cluster" shape "$h" "$rate" >/dev/null || exit 1; done
        echo
        echo "## $shape ($hosts hosts), links shaped to $rate"
        printf '%-7s %10s %14s %14s %7s %16s %16s %7s\n' variant size 'latency(us)' \
            'bound(us)' time/bd 'sent B/call/host' '2(N-1)/N*S' sent/bd
        for ((s = lo; s <= hi; s *= 4)); do
            wire=$(awk -v n="$hosts" -v s="$s" 'BEGIN {printf "%.0f", 2 * (n - 1) / n * s}')
            bound=nan
            [ "$bps" -gt 0 ] && bound=$(awk -v w="$wire" -v r="$bps" 'BEGIN {printf "%.1f", w * 8 / r * 1e6}')
            for v in "${variant_list[@]}"; do
                read -r -a a <<<"$(run "$shape" "$v" "$s" "$i1")"
                read -r -a b <<<"$(run "$shape" "$v" "$s" "$i2")"
                # Per host: (sent in the I2 run - sent in the I1 run) / (I2 - I1).
                sent=$(awk -v h="$hosts" -v d=$((i2 - i1)) -v A="${a[*]}" -v Bv="${b[*]}" 'BEGIN {
                    na = split(A, x, " "); split(Bv, y, " "); m = 0
                    for (k = 1; k <= h; ++k) {
                        v = ((y[1 + h + k] - y[1 + k]) - (x[1 + h + k] - x[1 + k])) / d
                        if (v > m) m = v
                    }
                    printf "%.0f", m }')
                lat=${b[0]}
                tr=$(awk -v l="$lat" -v b="$bound" 'BEGIN {if (b == "nan" || l == "nan") print "-"; else printf "%.2f", l / b}')
                br=$(awk -v x="$sent" -v w="$wire" 'BEGIN {printf "%.3f", x / w}')
                printf '%-7s %10s %14s %14s %7s %16s %16s %7s\n' "$v" "$s" "$lat" "$bound" "$tr" \
                    "$sent" "$wire" "$br"
                echo "$shape,$rate,$v,$s,$lat,$bound,$tr,$sent,$wire,$br" >>"$out"
            done
        done
    done
    "$cluster" down >/dev/null
done
echo
echo "# results: $out"
