#!/usr/bin/env bash
# contrib/bench.sh - runs perf/gpucoll_bench several ways, side by side, and
# prints every table plus a comparison (median of R repeats per size):
#   device buffers through gpucoll (emu or cuda; one column per algorithm given
#   with -a), host buffers with the component loaded, host buffers with the
#   component off (--mca coll ^gpucoll).
# Every run also writes its results as CSV (gpucoll_bench --csv); they are
# collected in one result directory, with results.csv (all rows) and the
# plots of contrib/plot-bench.py (latency and bus bandwidth against size).
#
#   contrib/bench.sh                        # allreduce 4:64M, np 4, best backend
#   contrib/bench.sh -n 4 -c allreduce -m 4K:64M -r 3
#   contrib/bench.sh -c bcast -a staged,one_shot -- -t double -T 0.5
#   contrib/bench.sh -N 2x2,4x1,2x1 -a auto,staged -m 4M:64M   # between (faked) nodes
set -u

usage() {
    cat <<'EOF'
usage: contrib/bench.sh [options] [BUILDDIR] [-- gpucoll_bench options]
  -n NP        ranks (default 4)
  -c COLLS     allreduce|bcast|allgather|reduce_scatter|reduce_scatter_block|reduce,
               a comma list, or all (default allreduce)
  -m MIN:MAX   sizes in bytes, K/M/G suffixes (default 4:64M)
  -r R         repeats of every variant, interleaved; the comparison shows the
               median per size (default 3)
  -d cuda|emu  device backend (default: cuda if `nvidia-smi -L` lists a GPU and
               the build has CUDA, else emu)
  -a ALGS      comma list of algorithms: one device run each, with
               --mca coll_gpucoll_<coll>_algorithm ALG (the tables show the
               algorithm actually taken, from gpucoll's counters)
  -T SECONDS   time cap per size and run (gpucoll_bench -T; default 0.5)
  -x ARGS      extra mpirun arguments (one string, split on spaces)
  -N SHAPES    fake nodes on this machine (GPUCOLL_HOSTID per rank), a comma list
               of shapes NODESxRANKS (2x2: 2 nodes of 2 ranks) or sizes joined
               by + (2+1+1); replaces -n. UCX goes over tcp loopback unless
               UCX_TLS / UCX_NET_DEVICES are set in the environment
  -b BUILDDIR  build tree (default: the argument, ./_build, ./_build/*, the
               current directory, or _build next to this script)
  -o DIR       result directory (default: $GPUCOLL_BENCH_RESULTS/DATE-TIME-DEVICE,
               GPUCOLL_BENCH_RESULTS defaulting to BUILDDIR/bench-results): runs/
               holds each run's CSV (gpucoll_bench --csv, with the variant's
               label and the commit: git describe of the build's source),
               results.csv all of them, comparison.txt the comparison tables,
               and DEVICE-COLL-latency.png / DEVICE-COLL-busbw.png the plots
  -P           no plots (also GPUCOLL_BENCH_PLOTS=0); contrib/plot-bench.py
               RESULTS.csv makes them later. Plots need matplotlib:
               contrib/plot-deps.sh installs it into a virtual environment under
               $GPUCOLL_CACHE (default /var/cache/gpucoll) the first time; when
               it cannot, bench.sh says so and still succeeds
  -q           print only the commands, the comparison tables and where the
               results went
  -H           device columns only (no host-buffer runs); the ratio column
               then compares with the first algorithm of -a
  -h           this help
Options after -- go to gpucoll_bench (-t TYPE, -o OP, -c, --in-place, -i, -w, ...).
Environment: MPIRUN (default mpirun), GPUCOLL_BENCH_RESULTS, GPUCOLL_BENCH_PLOTS and
GPUCOLL_CACHE (see -o and -P).
EOF
}

np=4
colls=allreduce
sizes=4:64M
repeats=3
device=
algs=
tcap=0.5
extra_mpirun=
shapes=
builddir=
quiet=0
plots=${GPUCOLL_BENCH_PLOTS:-1}
resdir=
host_runs=1
bench_args=()

while [ $# -gt 0 ]; do
    case $1 in
    -n) np=$2; shift 2 ;;
    -c) colls=$2; shift 2 ;;
    -m) sizes=$2; shift 2 ;;
    -r) repeats=$2; shift 2 ;;
    -d) device=$2; shift 2 ;;
    -a) algs=$2; shift 2 ;;
    -T) tcap=$2; shift 2 ;;
    -x) extra_mpirun=$2; shift 2 ;;
    -N) shapes=$2; shift 2 ;;
    -b) builddir=$2; shift 2 ;;
    -o) resdir=$2; shift 2 ;;
    -P) plots=0; shift ;;
    -q) quiet=1; shift ;;
    -H) host_runs=0; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; bench_args=("$@"); break ;;
    -*) echo "bench.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) builddir=$1; shift ;;
    esac
done

case $np in '' | *[!0-9]*) echo "bench.sh: -n needs a number" >&2; exit 2 ;; esac
case $repeats in '' | *[!0-9]* | 0) echo "bench.sh: -r needs a positive number" >&2; exit 2 ;; esac

# ---------------------------------------------------------------- build tree
is_build() { [ -x "$1/perf/gpucoll_bench" ]; }
# the newest benchmark among the candidates, or nothing
newest_build() {
    local best='' d
    for d in "$@"; do
        is_build "$d" || continue
        # never a sanitizer build (contrib/sanitize.sh): its timings mean nothing
        grep -q '^CFLAGS = .*-fsanitize' "$d/Makefile" 2>/dev/null && continue
        if [ -z "$best" ] || [ "$d/perf/gpucoll_bench" -nt "$best/perf/gpucoll_bench" ]; then best=$d; fi
    done
    [ -n "$best" ] && echo "$best"
}
if [ -z "$builddir" ]; then
    here=$(cd "$(dirname "$0")/.." && pwd)
    builddir=$(newest_build ./_build) || builddir=$(newest_build ./_build/*) ||
        builddir=$(newest_build .) || builddir=$(newest_build "$here/_build") ||
        builddir=$(newest_build "$here"/_build/*) || builddir=
fi
if [ -z "$builddir" ] || ! is_build "$builddir"; then
    echo "bench.sh: no build tree with perf/gpucoll_bench found${builddir:+ at \"$builddir\"}." >&2
    echo "  Build one: mkdir -p _build && cd _build && ../configure && make -j" >&2
    echo "  and pass it: contrib/bench.sh -b _build" >&2
    exit 2
fi
B=$(cd "$builddir" && pwd)
bench=$B/perf/gpucoll_bench
compdir=$B/coll/.libs
echo "# build tree: $B"
[ -f "$compdir/mca_coll_gpucoll.so" ] ||
    echo "bench.sh: warning: $compdir/mca_coll_gpucoll.so is missing: the component will be off" >&2

# ---------------------------------------------------------------- backend
has_cuda_build() { grep -q '^#define GPUCOLL_HAVE_CUDA 1' "$B/config.h" 2>/dev/null; }
has_gpu() { nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }
if [ -z "$device" ]; then
    if has_gpu && has_cuda_build; then
        device=cuda
    else
        device=emu
        has_gpu && echo "bench.sh: note: a GPU is present but $B was built without CUDA: using emu" >&2
    fi
fi
case $device in cuda | emu) ;; *) echo "bench.sh: -d must be cuda or emu" >&2; exit 2 ;; esac

case $colls in all) colls=allreduce,bcast,allgather,reduce_scatter,reduce_scatter_block,reduce ;; esac

# ---------------------------------------------------------------- result files
top=$(cd "$(dirname "$0")/.." && pwd)
# The commit of the build's source (gpu-prepare.sh's builds: BUILD_COMMIT).
src=$(sed -n 's/^abs_top_srcdir = //p' "$B/Makefile" 2>/dev/null)
commit=$(git -C "${src:-$top}" describe --always --dirty 2>/dev/null) ||
    commit=$(cat "$B/BUILD_COMMIT" 2>/dev/null) || commit=
if [ -z "$resdir" ]; then
    resdir=${GPUCOLL_BENCH_RESULTS:-$B/bench-results}/$(date -u +%Y%m%d-%H%M%S)-$device
    [ -e "$resdir" ] && resdir=$resdir-$$
fi
mkdir -p "$resdir/runs" || { echo "bench.sh: cannot create the result directory $resdir" >&2; exit 2; }
resdir=$(cd "$resdir" && pwd)
echo "# result files: $resdir"

# ---------------------------------------------------------------- mpirun
# make_mpirun NP [NODE_SIZES]: mpirun_cmd for NP ranks; with node sizes
# ("2 1 1"), a wrapper (wrap_cmd) that gives each rank its fake node.
make_mpirun() {
    local n=$1 sizes=${2:-}
    # shellcheck disable=SC2206 # MPIRUN may hold a command with arguments
    mpirun_cmd=(${MPIRUN:-mpirun} -np "$n")
    [ "$(id -u)" = 0 ] && mpirun_cmd+=(--allow-run-as-root)
    ncpu=$(nproc 2>/dev/null || echo 1)
    [ "$n" -gt "$ncpu" ] && mpirun_cmd+=(--oversubscribe)
    mpirun_cmd+=(-x LD_LIBRARY_PATH)
    # shellcheck disable=SC2206
    [ -n "$extra_mpirun" ] && mpirun_cmd+=($extra_mpirun)
    wrap_cmd=()
    if [ -n "$sizes" ]; then
        mpirun_cmd+=(-x "UCX_TLS=${UCX_TLS:-tcp,self}" -x "UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}")
        wrap_cmd=(sh -c 'r=$OMPI_COMM_WORLD_RANK; n=0; for c in '"$sizes"'; do
            [ "$r" -lt "$c" ] && break; r=$((r - c)); n=$((n + 1)); done
            export GPUCOLL_HOSTID=fake$n; exec "$0" "$@"')
    fi
}
env_cmd=(env "OMPI_MCA_mca_base_component_path=$compdir:SYS_DEFAULT:USER_DEFAULT"
    "LD_LIBRARY_PATH=$B/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
# shape_sizes SHAPE: "2x2" -> "2 2", "2+1+1" -> "2 1 1"
shape_sizes() {
    case $1 in
    *x*) local k out=''; for ((k = 0; k < ${1%x*}; k++)); do out+="${1#*x} "; done; echo "$out" ;;
    *) echo "${1//+/ }" ;;
    esac
}

# Prints a command so that it can be pasted back into a shell.
show() {
    local out='' a
    for a in "$@"; do
        case $a in
        '' | *[!A-Za-z0-9_./:=,^+@%-]*) out+=" '${a//\'/\'\\\'\'}'" ;;
        *) out+=" $a" ;;
        esac
    done
    echo "\$${out}"
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpucoll-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
status=0

# Comparison table from the outputs of every variant and repeat.
#   files: $tmp/<coll>.v<variant>.r<repeat>; labels: |-separated; dev: 1 = device variant
compare() {
    local coll=$1 labels=$2 devs=$3
    awk -v labels="$labels" -v devs="$devs" -v coll="$coll" -v np="$where" -v dev="$device" \
        -v reps="$repeats" '
    function median(key, n,   i, j, t, a) {
        for (i = 1; i <= n; i++) a[i] = vals[key, i]
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    BEGIN { nv = split(labels, lab, "|"); split(devs, isdev, "|"); ns = 0 }
    FNR == 1 { f = FILENAME; sub(/.*\.v/, "", f); v = f; sub(/\..*/, "", v) }
    /^#/ || NF < 12 || $1 !~ /^[0-9]+$/ { next }  # rows begin with a size (not warnings)
    {
        s = $1
        if (!(s in seen)) { seen[s] = 1; order[++ns] = s }
        k = v SUBSEP s
        n[k]++; vals[k, n[k]] = $3; bw[k, n[k]] = $7
        t = $9 "/" $10; if ($9 == "off") t = "off"
        if (!((k, t) in took)) { took[k, t] = 1; taken[k] = (taken[k] == "" ? t : taken[k] "|" t) }
        if (NF >= 13 && $13 != "PASS") fail[k] = 1
    }
    END {
        off = 0; base = lab[1]; for (i = 1; i <= nv; i++) if (lab[i] == "host,off") { off = i - 1; base = "off" }
        printf "# comparison: %s, %s, %s, median of %d run%s per size: latency us (busbw GB/s)\n", coll, np, dev, reps, reps == 1 ? "" : "s"
        printf "#%10s", "size(B)"
        for (i = 1; i <= nv; i++) {
            printf "  %20s", lab[i]
            if (isdev[i]) printf "  %-24s", "path/algorithm taken"
        }
        for (i = 1; i <= nv; i++) if (isdev[i]) printf "  %12s", lab[i] "/" base
        printf "\n"
        for (j = 1; j <= ns; j++) {
            s = order[j]; printf " %10s", s
            for (i = 1; i <= nv; i++) {
                k = (i - 1) SUBSEP s
                if (n[k] == 0) { med[i] = 0; printf "  %20s", "-"; if (isdev[i]) printf "  %-24s", "-"; continue }
                med[i] = median(k, n[k])
                for (r = 1; r <= n[k]; r++) vals[k, r] = bw[k, r]
                printf "  %11.2f (%6.2f)", med[i], median(k, n[k])
                if (isdev[i]) printf "  %-24s", taken[k] (fail[k] ? " FAIL" : "")
            }
            for (i = 1; i <= nv; i++) if (isdev[i]) {
                if (med[i] > 0 && med[off + 1] > 0) printf "  %12.2f", med[i] / med[off + 1]
                else printf "  %12s", "-"
            }
            printf "\n"
        }
    }' "$tmp/$coll".v*.r*
}

IFS=, read -r -a coll_list <<<"$colls"
IFS=, read -r -a alg_list <<<"${algs:-}"
[ ${#alg_list[@]} -eq 0 ] && alg_list=("")

summary=()
IFS=, read -r -a shape_list <<<"${shapes:-}"
[ ${#shape_list[@]} -eq 0 ] && shape_list=("")
for shape in "${shape_list[@]}"; do
if [ -n "$shape" ]; then
    sizes_of_nodes=$(shape_sizes "$shape")
    np=0
    for c in $sizes_of_nodes; do np=$((np + c)); done
    where="np $np as fake nodes $shape"
    make_mpirun "$np" "$sizes_of_nodes"
else
    where="np $np"
    make_mpirun "$np"
fi
for coll in "${coll_list[@]}"; do
    labels=() devs=() vargs=()
    for alg in "${alg_list[@]}"; do
        labels+=("$device${alg:+:$alg}")
        devs+=(1)
        vargs+=("--mca coll_gpucoll_device $device${alg:+ --mca coll_gpucoll_${coll}_algorithm $alg}|-d $device")
    done
    if [ "$host_runs" = 1 ]; then
        labels+=("host,gpucoll") devs+=(0) vargs+=("--mca coll_gpucoll_device $device|-d host")
        labels+=("host,off") devs+=(0) vargs+=("--mca coll ^gpucoll|-d host")
    fi

    for ((r = 1; r <= repeats; r++)); do
        for i in "${!vargs[@]}"; do
            IFS='|' read -r margs bargs <<<"${vargs[$i]}"
            # shellcheck disable=SC2206
            cmd=("${env_cmd[@]}" "${mpirun_cmd[@]}" $margs "${wrap_cmd[@]}" "$bench" "$coll" $bargs -m "$sizes" -T "$tcap"
                --csv "$resdir/runs/$coll${shape:+.$shape}.v$i.r$r.csv" --label "${labels[$i]}${shape:+ @$shape}"
                ${commit:+--commit "$commit"} "${bench_args[@]}")
            out=$tmp/$coll.v$i.r$r
            echo "# [$coll ${labels[$i]}, $where, run $r/$repeats]"
            show "${cmd[@]}"
            if [ "$quiet" = 1 ]; then
                "${cmd[@]}" >"$out" 2>&1
            else
                "${cmd[@]}" 2>&1 | tee "$out"
            fi
            rc=${PIPESTATUS[0]}
            if [ "$rc" != 0 ]; then
                echo "bench.sh: the run above failed (exit $rc)" >&2
                [ "$quiet" = 1 ] && tail -n 20 "$out" >&2
                status=1
            fi
            echo
        done
    done
    old_ifs=$IFS
    IFS='|'
    summary+=("$(compare "$coll" "${labels[*]}" "${devs[*]}")")
    IFS=$old_ifs
    rm -f "$tmp/$coll".v*.r*
done
done

for s in "${summary[@]}"; do
    printf '%s\n\n' "$s"
done | tee "$resdir/comparison.txt"

# All rows in one file (one header), then the plots.
set -- "$resdir"/runs/*.csv
if [ -f "$1" ]; then
    awk 'FNR == 1 && NR != 1 { next } { print }' "$@" >"$resdir/results.csv"
    echo "# results: $resdir/results.csv ($(($(wc -l <"$resdir/results.csv") - 1)) rows; one file per run in $resdir/runs)"
    if [ "$plots" = 0 ]; then
        echo "# plots: not made (-P or GPUCOLL_BENCH_PLOTS=0); contrib/plot-bench.py $resdir/results.csv makes them"
    elif ! command -v python3 >/dev/null 2>&1; then
        echo "bench.sh: no plots: python3 is not installed (contrib/install-deps.sh)" >&2
    else
        # (the first time, contrib/plot-deps.sh installs matplotlib: ~20 s)
        plot_cmd=(python3 "$top/contrib/plot-bench.py" -o "$resdir" -p "$device-" "$resdir/results.csv")
        show "${plot_cmd[@]}"
        if pngs=$("${plot_cmd[@]}" 2>"$tmp/plot.err"); then
            echo "# plots:"
            printf '%s\n' "$pngs" | sed 's/^/#   /'
        else
            echo "bench.sh: no plots (that alone does not fail the benchmark):" >&2
            sed 's/^/  /' "$tmp/plot.err" | tail -n 8 >&2
            echo "  contrib/plot-bench.py $resdir/results.csv makes them once matplotlib can be had" >&2
        fi
    fi
else
    echo "bench.sh: no result file was written (every run failed?)" >&2
fi
exit $status
