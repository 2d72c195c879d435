#!/bin/sh
# calibrate.sh - contrib/calibrate.py's own code, without measuring: the CPU
# affinity its shared-write benchmark leaves behind, --save / --load of raw
# measurements, and a params file fitted from a saved run (test_calibrate.py
# says what each part checks).
set -eu
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 is not installed"; exit 77; }
# gpucoll_topo, which the fits run some 150 times, never uses UCX, but links
# it: UCX 1.23 (Debian testing) spends 0.4 s of every process start
# installing its memory hooks (136 s of this test there), none without them.
export UCX_MEM_EVENTS=no
exec python3 -B "$GPUCOLL_SRCDIR/test/tools/test_calibrate.py"
