#!/bin/sh
# contrib/fetch-nvml-header.sh DIR: puts the real nvml.h into DIR (from the
# nvidia-nvml-dev wheel on PyPI, downloaded, not installed) unless DIR has it.
# Only the header is needed at build time: NVML itself is the driver's
# library, opened at run time. Exits nonzero (and says why) when it cannot.
set -eu
dir=${1:?usage: fetch-nvml-header.sh DIR}
[ -f "$dir/nvml.h" ] && exit 0
py=$(command -v python3 || true)
[ -n "$py" ] || { echo "fetch-nvml-header: no python3"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" nvidia-nvml-dev ||
    { echo "fetch-nvml-header: pip could not download nvidia-nvml-dev"; exit 1; }
mkdir -p "$dir"
"$py" - "$tmp" "$dir" <<'PY'
import glob, sys, zipfile
tmp, out = sys.argv[1], sys.argv[2]
for whl in glob.glob(tmp + "/*.whl"):
    with zipfile.ZipFile(whl) as z:
        for name in z.namelist():
            if name.endswith("/include/nvml.h"):
                with open(out + "/nvml.h", "wb") as f:
                    f.write(z.read(name))
                sys.exit(0)
sys.exit("fetch-nvml-header: the wheel has no include/nvml.h")
PY
echo "fetch-nvml-header: $dir/nvml.h"
