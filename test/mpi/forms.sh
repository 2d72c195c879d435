#!/bin/sh
# forms.sh - test_forms: every collective of the standard (blocking,
# nonblocking, persistent; neighborhood collectives on a ring) on device,
# host and mixed buffers, compared byte for byte with Open MPI's own result
# on host buffers, the path of every call checked; several nonblocking calls
# outstanding completed in reverse order; persistent requests started 100
# times with new inputs; persistent requests that outlive their
# communicator. 1 to 4 ranks on the emulated device.
set -eu
. "$(dirname "$0")/mpi-env.sh"

prog=$MPI_TESTDIR/test_forms
for np in $TEST_NPS; do
    # 3 ranks: the quick size set (the others cover the large sizes), and
    # the progress threads as the machine decides (auto: lazy where there
    # are fewer than two cores per rank); the others force them on, and check
    # that one completes a call while no rank is inside MPI.
    if [ "$np" = 3 ]; then
        unset OMPI_MCA_coll_gpucoll_progress_thread
        run_np "$np" "$prog" --quick
    else
        export OMPI_MCA_coll_gpucoll_progress_thread=on
        run_np "$np" "$prog"
    fi
done
