#!/bin/sh
# contrib/test-version-guard.sh: a component built for one Open MPI release,
# placed in another's component path, declines with one line and the job
# runs on without it (no crash, right results): a job of
# test_host_passthrough (collectives on host buffers, results checked), and
# ompi_info, which must list none of the component's parameters. Two cases:
#   - the 4.1 build (_build/default, Debian 12) inside Debian 13 (5.0.7);
#   - the 5.0 build (_build/trixie) inside Debian testing (6.0.0rc2).
# Run after contrib/test.sh and contrib/test-series.sh trixie/testing (CI's
# order). Ends with "N passed, N failed, N skipped".
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
pass=0 fail=0 skip=0

# case NAME BUILD SUITE: BUILD's component in SUITE's Open MPI.
case_run() {
    name=$1 build=$2 suite=$3
    so=$top/_build/$build/coll/.libs/mca_coll_gpucoll.so
    lib=$top/_build/$build/src/.libs
    run=$top/_build/$suite
    if [ ! -f "$so" ] || [ ! -x "$run/test/mpi/test_host_passthrough" ]; then
        echo "SKIP: $name: needs _build/$build and _build/$suite built"
        skip=$((skip + 1))
        return
    fi
    out=$top/_build/guard-$name.log
    # The foreign build in a directory of its own, with its libgpucoll.
    stage=$top/_build/guard-$name
    rm -rf "$stage"
    mkdir -p "$stage/comp" "$stage/lib"
    cp "$so" "$stage/comp/"
    cp -L "$lib"/libgpucoll.so.* "$stage/lib/" 2>/dev/null
    "$top/contrib/rootfs.sh" "$suite" /bin/sh -c '
        stage=/src/_build/guard-$1 run=/src/_build/$2
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        export PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe PRTE_MCA_mapby=:oversubscribe
        export OMPI_MCA_mca_base_component_path=$stage/comp:SYS_DEFAULT
        export PMIX_MCA_mca_base_component_path=$(pkg-config --variable=libdir pmix)/pmix
        export LD_LIBRARY_PATH=$stage/lib OMPI_MCA_coll_gpucoll_device=emu
        timeout 120 mpirun -np 2 "$run/test/mpi/test_host_passthrough" || exit 1
        timeout 60 ompi_info --param coll gpucoll --level 9 2>&1 || :
    ' guard "$name" "$suite" >"$out" 2>&1
    rc=$?
    lines=$(grep -c '^coll:gpucoll: built for Open MPI .*, running in Open MPI .*: not loaded' "$out")
    if [ $rc -eq 0 ] && [ "$lines" -ge 1 ] && ! grep -q 'coll_gpucoll_priority\|Segmentation\|signal' "$out"; then
        echo "PASS: $name: $(grep -m1 '^coll:gpucoll: built for' "$out" | cut -c1-90)..."
        pass=$((pass + 1))
    else
        echo "FAIL: $name (exit $rc, $lines guard lines; $out):"
        tail -20 "$out"
        fail=$((fail + 1))
    fi
}

case_run ompi41-in-ompi50 default trixie
case_run ompi50-in-ompi60 trixie testing
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
