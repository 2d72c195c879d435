#!/bin/sh
# topology.sh - the node's topology in the accelerated path, with machines we
# do not have (test/topo fixtures; emu: rank r plays GPU r of the file, or GPU
# $GPUCOLL_EMU_GPU):
#  1. a PCIe-only workstation (pcie_4gpu.xml), np 4: every rank says the
#     links call for ring algorithms, rank 0 prints the node's summary once;
#     large allreduce, allgather and reduce_scatter_block take ring, a small
#     allreduce one_shot (verbose 10, call by call);
#  2. an NVSwitch node (dgx_h100.xml + .nvlinks), np 4: direct family, large
#     allreduce two_shot;
#  3. ranks spread across the PCIe switches (GPUs 0,2,1,3): ring order
#     0 1 3 2, and test_collectives with the ring algorithms forced, checked
#     call by call: right results in a ring order other than rank order;
#  4. an unreadable topology file: one message per rank, calls accelerated
#     and right;
#  6. coll_gpucoll_cost_model: the model's table on every rank, large
#     allreduce ring and small one_shot by the pcie preset, a forced
#     algorithm winning, an unknown model said once per process; a partial
#     params file's table on emu, that gpucoll_topo prints the same;
#  5. gpucoll_topo on this machine and on every fixture, --json, --help, a
#     usage error; --model tables, --params read back as a model; finite
#     predictions on 65536 x 65536 ranks; absurd parameters, directories,
#     empty files and GPUs without bus ids refused;
#  7. the whole 8-GPU NVSwitch node, np 8, one emulated GPU per rank (device
#     flags, as on the real node): every collective accelerated and right.
# Parts 1-4 need the emu backend (a GPU's real bus ids are not in the files).
set -eu
. "$(dirname "$0")/mpi-env.sh"

fixtures=$GPUCOLL_SRCDIR/test/topo
bench=$GPUCOLL_BUILDDIR/perf/gpucoll_bench
topo=$GPUCOLL_BUILDDIR/tools/gpucoll_topo

echo "== 5. gpucoll_topo"
"$topo" >"$MPI_TMP/topo.txt" || fail "gpucoll_topo failed on this machine"
grep -q '^CPUs: ' "$MPI_TMP/topo.txt" || fail "gpucoll_topo: no CPU line"
for f in dgx_h100 pcie_4gpu two_socket; do
    links=""
    [ -f "$fixtures/$f.nvlinks" ] && links="--nvlinks $fixtures/$f.nvlinks"
    # shellcheck disable=SC2086 # words
    "$topo" --xml "$fixtures/$f.xml" $links >"$MPI_TMP/topo.txt" || fail "gpucoll_topo $f"
    # shellcheck disable=SC2086
    "$topo" --xml "$fixtures/$f.xml" $links --json >"$MPI_TMP/topo.json" || fail "gpucoll_topo $f --json"
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$MPI_TMP/topo.json" ||
        fail "gpucoll_topo $f --json: not JSON"
done
grep -q 'Algorithm family: ring' "$MPI_TMP/topo.txt" || fail "two_socket: not ring"
"$topo" --help | grep -q '^SYNOPSIS' || fail "gpucoll_topo --help"
rc=0
"$topo" --bogus 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "gpucoll_topo --bogus: exit $rc, expected 2"

# The cost model: a table per preset; a params file written by --params
# reads back to the same predictions; large PCIe allreduce fastest on ring.
"$topo" --model pcie4-workstation --ranks-per-node 4 --sizes 64M:64M >"$MPI_TMP/model.txt" ||
    fail "gpucoll_topo --model"
grep -q '^     64M .* ring$' "$MPI_TMP/model.txt" || { cat "$MPI_TMP/model.txt"; fail "pcie 64M: not ring"; }
"$topo" --model pcie4-workstation --params >"$MPI_TMP/pcie.params" || fail "--params"
"$topo" --model "$MPI_TMP/pcie.params" --ranks-per-node 4 --sizes 64M:64M >"$MPI_TMP/model2.txt" ||
    fail "gpucoll_topo --model FILE"
[ "$(tail -n +2 "$MPI_TMP/model.txt")" = "$(tail -n +2 "$MPI_TMP/model2.txt")" ] ||
    fail "a params file from --params predicts differently from its preset"
"$topo" --model h100-nvswitch --nodes 4 --coll all --sizes 1K:1G >/dev/null || fail "--coll all"
rc=0
"$topo" --model nosuch 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "--model nosuch: exit $rc, expected 1"
# A partial params file is read as the component reads it: its missing keys
# from the backend's preset (the tool used h100-nvswitch, the component emu).
printf '# partial\nsync_us = 9\n' >"$MPI_TMP/partial.params"
for run in emu:emu cuda:h100-nvswitch; do
    "$topo" --model "${run#*:}" --params | sed 's/^sync_us = .*/sync_us = 9/' >"$MPI_TMP/want.params"
    "$topo" --model "$MPI_TMP/partial.params" --backend "${run%:*}" --params >"$MPI_TMP/got.params" ||
        fail "--model FILE --backend ${run%:*}"
    cmp -s "$MPI_TMP/want.params" "$MPI_TMP/got.params" ||
        { diff "$MPI_TMP/want.params" "$MPI_TMP/got.params"; fail "a partial file on ${run%:*} does not refine ${run#*:}"; }
done
# A directory or an empty file as the params or the NVLink file: an error,
# not "the preset" or "no NVLinks".
: >"$MPI_TMP/empty"
for args in "--model $MPI_TMP" "--model $MPI_TMP/empty" \
    "--xml $fixtures/two_socket.xml --nvlinks $MPI_TMP" \
    "--xml $fixtures/two_socket.xml --nvlinks $MPI_TMP/empty"; do
    rc=0
    # shellcheck disable=SC2086 # words
    "$topo" $args >/dev/null 2>"$MPI_TMP/err" || rc=$?
    [ "$rc" -eq 1 ] && grep -q 'Is a directory\|sets no parameter\|no nvlink statement' "$MPI_TMP/err" ||
        { cat "$MPI_TMP/err"; fail "gpucoll_topo $args: exit $rc, expected 1 with a message"; }
done
# GPUs without PCI bus ids in an XML all became 0000:00:00.0 ("X" between
# two GPUs): an error naming the duplicate.
sed 's/ pci_busid="0000:0[34]:00.0"//' "$fixtures/pcie_4gpu.xml" >"$MPI_TMP/nobusid.xml"
rc=0
"$topo" --xml "$MPI_TMP/nobusid.xml" >/dev/null 2>"$MPI_TMP/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q 'have the same PCI bus id 0000:00:00.0' "$MPI_TMP/err" ||
    { cat "$MPI_TMP/err"; fail "GPUs without bus ids: exit $rc, expected 1 with a message"; }
# 65536 x 65536 ranks overflowed an int: NaN printed as the fastest.
"$topo" --model h100-nvswitch --nodes 65536 --ranks-per-node 65536 --coll all --sizes 8:1G \
    >"$MPI_TMP/huge.txt" || fail "gpucoll_topo --model on 65536 x 65536 ranks"
if tail -n +3 "$MPI_TMP/huge.txt" | grep -qi 'nan\|inf'; then cat "$MPI_TMP/huge.txt"; fail "65536 x 65536: not finite"; fi
# Absurd parameters are refused, naming the key and the range.
printf 'peer.latency_us = 1e308\n' >"$MPI_TMP/absurd.params"
rc=0
"$topo" --model "$MPI_TMP/absurd.params" 2>"$MPI_TMP/absurd.err" || rc=$?
[ "$rc" -eq 1 ] || fail "--model with a latency of 1e308: exit $rc, expected 1"
grep -q "'peer.latency_us' wants a time in microseconds in \[0, 1e9\], got '1e308'" "$MPI_TMP/absurd.err" ||
    { cat "$MPI_TMP/absurd.err"; fail "--model with a latency of 1e308: no message naming the key"; }

[ "$TEST_DEVICE" = emu ] || skip "parts 1-4 play fixture GPUs on the emu backend"

pcie="--mca coll_gpucoll_topology_file $fixtures/pcie_4gpu.xml"
nvs="--mca coll_gpucoll_topology_file $fixtures/dgx_h100.xml --mca coll_gpucoll_nvlink_file $fixtures/dgx_h100.nvlinks"
# algo_of MPI-ARGS -- COLL SIZE: the algorithm every rank's verbose-10 line
# names for one call of COLL on SIZE bytes (fails unless all 4 agree).
algo_of() {
    _args=""
    while [ "$1" != "--" ]; do _args="$_args $1"; shift; done
    shift
    # shellcheck disable=SC2086 # words
    run_np 4 $_args --mca coll_gpucoll_verbose 10 "$bench" "$1" -m "$2:$2" -i 2 -w 1 -c >/dev/null
    _a=$(sed -n "s/.*(blocking): $1 \([a-z_]*\), $2 bytes.*/\1/p" "$MPI_OUT" | sort -u)
    _n=$(grep -c "(blocking): $1 [a-z_]*, $2 bytes" "$MPI_OUT" || true)
    [ "$(echo "$_a" | wc -l)" -eq 1 ] && [ "$_n" -ge 4 ] ||
        { cat "$MPI_OUT"; fail "$1 $2 bytes: algorithms '$_a' over $_n calls"; }
    echo "$_a"
}
expect_algo() { # expect_algo WANT MPI-ARGS -- COLL SIZE
    _want=$1
    shift
    _got=$(algo_of "$@")
    [ "$_got" = "$_want" ] || fail "$*: $_got, expected $_want"
    echo "ok: $* -> $_got"
}

echo "== 1. PCIe workstation: ring"
# shellcheck disable=SC2086 # words
run_np 4 $pcie --mca coll_gpucoll_verbose 1 "$MPI_TESTDIR/test_collectives" --no-large --expect accelerated
n=$(grep -c 'topology: ring algorithms .*ring order: 0 1 2 3' "$MPI_OUT" || true)
[ "$n" -ge 4 ] || { cat "$MPI_OUT"; fail "expected every rank to choose ring algorithms (got $n lines)"; }
n=$(grep -c 'topology: Algorithm family: ring' "$MPI_OUT" || true)
[ "$n" -eq 1 ] || { cat "$MPI_OUT"; fail "expected the node summary once, got $n"; }
grep -q 'topology: GPU0    X      PIX    PHB    PHB' "$MPI_OUT" || { cat "$MPI_OUT"; fail "no matrix in the summary"; }
expect_algo ring $pcie -- allreduce 1048576
expect_algo one_shot $pcie -- allreduce 16
expect_algo ring $pcie -- allgather 1048576
expect_algo ring $pcie -- reduce_scatter_block 1048576

echo "== 2. NVSwitch node: direct family"
# shellcheck disable=SC2086 # words
run_np 4 $nvs --mca coll_gpucoll_verbose 1 "$bench" allreduce -m 1M:1M -i 2 -w 1 -c
n=$(grep -c 'topology: direct algorithms (every pair of GPUs is joined by NVLink' "$MPI_OUT" || true)
[ "$n" -ge 4 ] || { cat "$MPI_OUT"; fail "expected the direct family on every rank"; }
expect_algo two_shot $nvs -- allreduce 1048576
expect_algo direct $nvs -- allgather 1048576

echo "== 3. ranks spread across the switches: ring order 0 1 3 2"
spread='export GPUCOLL_EMU_GPU=$(echo 0 2 1 3 | cut -d" " -f$((OMPI_COMM_WORLD_RANK + 1)));
    exec "$0" "$@"'
# shellcheck disable=SC2086 # words
run_mpi 4 --mca coll_gpucoll_device emu $pcie --mca coll_gpucoll_verbose 1 \
    --mca coll_gpucoll_allreduce_algorithm ring --mca coll_gpucoll_allgather_algorithm ring \
    --mca coll_gpucoll_reduce_scatter_algorithm ring \
    --mca coll_gpucoll_reduce_scatter_block_algorithm ring -- \
    sh -c "$spread" "$MPI_TESTDIR/test_collectives" --no-large --expect accelerated \
    --algorithm allreduce=ring --algorithm allgather=ring --algorithm reduce_scatter=ring \
    --algorithm reduce_scatter_block=ring
n=$(grep -c 'topology: ring algorithms .*ring order: 0 1 3 2$' "$MPI_OUT" || true)
[ "$n" -ge 4 ] || { cat "$MPI_OUT"; fail "expected ring order 0 1 3 2 on every rank (got $n lines)"; }

echo "== 6. the cost model picks: pcie4-workstation preset, np 4"
model="--mca coll_gpucoll_cost_model pcie4-workstation"
# shellcheck disable=SC2086 # words
run_np 4 $model --mca coll_gpucoll_verbose 1 "$bench" allreduce -m 8:8 -i 2 -w 1 -c
n=$(grep -c 'cost model pcie4-workstation: allreduce: one_shot to .* ring above' "$MPI_OUT" || true)
[ "$n" -ge 4 ] || { cat "$MPI_OUT"; fail "expected the model's table on every rank (got $n)"; }
expect_algo ring $model -- allreduce 4194304
expect_algo one_shot $model -- allreduce 16
grep -q 'cost model: predicted fastest' "$MPI_OUT" || fail "no 'cost model' reason in the call lines"
# A forced algorithm wins over the model.
expect_algo two_shot $model --mca coll_gpucoll_allreduce_algorithm two_shot -- allreduce 4194304
# An unknown model: said once per process, size thresholds instead.
run_np 3 --mca coll_gpucoll_cost_model no-such-model "$MPI_TESTDIR/test_collectives" --no-large \
    --expect accelerated
n=$(grep -c "coll_gpucoll_cost_model: 'no-such-model' is neither a preset" "$MPI_OUT" || true)
[ "$n" -eq 3 ] || { cat "$MPI_OUT"; fail "expected one message per process about the model (got $n)"; }

# The tool's selection table is the component's (it assumed cuda's 256 KiB
# one-shot slot, and filled a partial file from another preset): a partial
# file on emu, with emu's slot and with coll_gpucoll_allreduce_one_shot_max.
printf '# one-shot wins to 64K\nsync_us = 20\nd2h.latency_us = 200\nh2d.latency_us = 200\n' \
    >"$MPI_TMP/slow.params"
for max in 0 64K; do
    bytes=$max
    [ "$max" = 64K ] && bytes=65536
    # shellcheck disable=SC2086 # words
    run_np 4 --mca coll_gpucoll_cost_model "$MPI_TMP/slow.params" --mca coll_gpucoll_verbose 1 \
        --mca coll_gpucoll_allreduce_one_shot_max "$bytes" "$bench" allreduce -m 8:8 -i 2 -w 1 -c
    mine=$(sed -n 's/.*cost model emu: //p' "$MPI_OUT" | sort -u)
    "$topo" --model "$MPI_TMP/slow.params" --backend emu --one-shot-max "$max" --ranks-per-node 4 \
        --sizes 8:8 >"$MPI_TMP/selection.txt" || fail "gpucoll_topo --one-shot-max $max"
    tool=$(sed -n '/^Selection with/{n;s/^  //;p}' "$MPI_TMP/selection.txt")
    [ -n "$mine" ] && [ "$(echo "$mine" | wc -l)" -eq 1 ] && [ "$mine" = "$tool" ] ||
        { cat "$MPI_TMP/selection.txt"; fail "one-shot max $max: the component's table '$mine' is not the tool's '$tool'"; }
done
grep -q 'one_shot to 64K,' "$MPI_TMP/selection.txt" || fail "the table's one-shot is not bounded by its slot"

echo "== 4. an unreadable topology file"
run_np 3 --mca coll_gpucoll_topology_file /nonexistent/topo.xml "$MPI_TESTDIR/test_collectives" \
    --no-large --expect accelerated
n=$(grep -c 'topology not used: .*/nonexistent/topo.xml' "$MPI_OUT" || true)
[ "$n" -ge 3 ] || { cat "$MPI_OUT"; fail "expected a message on every rank about the file (got $n)"; }
echo "== 7. an 8-GPU node: np 8, one GPU per rank"
run_mpi 8 --mca coll_gpucoll_device emu $nvs --mca coll_gpucoll_verbose 1 -- \
    sh -c 'export GPUCOLL_EMU_GPU=$OMPI_COMM_WORLD_RANK; exec "$@"' sh \
    "$MPI_TESTDIR/test_collectives" --no-large --expect accelerated
grep -q 'accelerated path on: 8 ranks on one node, backend emu, device flags' "$MPI_OUT" ||
    { cat "$MPI_OUT"; fail "np 8 with one GPU per rank did not use device flags"; }
echo "PASS"
