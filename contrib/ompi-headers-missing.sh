#!/bin/sh
# contrib/ompi-headers-missing.sh [MPICC]: whether the Open MPI behind MPICC
# (default mpicc) lacks internal headers that the component needs (Debian 13
# and testing install opal_config.h without the headers it names). Lists the
# ones its headers name and it does not have, one a line, and exits 0 when
# the component's Open MPI headers do not preprocess; exits 1 when they do
# (or when no Open MPI is found).
set -eu
mpicc=${1:-mpicc}
dirs=$("$mpicc" --showme:incdirs 2>/dev/null) || exit 1
flags=""
for d in $dirs; do flags="$flags -I$d"; done
# shellcheck disable=SC2086 # flags: words
printf '#include "ompi_config.h"\n#include "ompi/mca/coll/coll.h"\n#include "ompi/communicator/communicator.h"\n#include "ompi/request/request.h"\n' |
    "$mpicc" -E $flags -x c - >/dev/null 2>&1 && exit 1
for d in $dirs; do
    [ -f "$d/opal_config.h" ] || continue
    for h in $(sed -n 's/.*"\(opal\/mca\/[^"]*\.h\)".*/\1/p' "$d/opal_config.h" | sort -u); do
        found=no
        for e in $dirs; do [ -f "$e/$h" ] && found=yes; done
        [ $found = yes ] || echo "$h"
    done
done
exit 0
