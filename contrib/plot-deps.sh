#!/bin/sh
# contrib/plot-deps.sh [--no-install]: prints (last line of stdout) a Python
# interpreter that imports matplotlib, for contrib/plot-bench.py: python3
# when it does (Debian's python3-matplotlib, say), else the virtual
# environment $GPUCOLL_CACHE/venv (default /var/cache/gpucoll/venv, outside
# the clone; ~/.cache/gpucoll/venv where that is not writable), made when
# missing: Debian's python3-venv (apt-get, needs root or sudo, as
# contrib/install-deps.sh does), then matplotlib from PyPI (once; about
# 200 MB installed). --no-install: only look. Exits 1 with the reason on stderr when
# there is none (no network, no apt-get, ...). Safe to run concurrently.
set -eu
has_mpl() { [ -x "$1" ] && "$1" -c 'import matplotlib' >/dev/null 2>&1; }

if has_mpl "$(command -v python3 || echo /nonexistent)"; then
    command -v python3
    exit 0
fi
cache=${GPUCOLL_CACHE:-/var/cache/gpucoll}
alt=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/gpucoll
for c in "$cache" "$alt"; do
    if has_mpl "$c/venv/bin/python"; then
        echo "$c/venv/bin/python"
        exit 0
    fi
done
if [ "${1:-}" = --no-install ]; then
    echo "plot-deps: no matplotlib for python3 nor in $cache/venv (contrib/plot-deps.sh installs it)" >&2
    exit 1
fi
command -v python3 >/dev/null 2>&1 || {
    echo "plot-deps: python3 is not installed (contrib/install-deps.sh installs it)" >&2
    exit 1
}
# Not root: the user's cache.
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
    cache=$alt
    mkdir -p "$cache" || {
        echo "plot-deps: cannot create $cache (set GPUCOLL_CACHE to a writable directory)" >&2
        exit 1
    }
fi
venv=$cache/venv
# One maker at a time (two benchmarks or tests may ask at once).
exec 9>"$cache/venv.lock"
command -v flock >/dev/null 2>&1 && flock 9
if has_mpl "$venv/bin/python"; then
    echo "$venv/bin/python"
    exit 0
fi

# python3 -m venv needs ensurepip, which Debian ships in python3-venv.
if command -v dpkg-query >/dev/null 2>&1 &&
    ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed"; then
    echo "plot-deps: installing: python3-venv" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    # Fail fast where there is no network (the lent GPU machine).
    apt_opts="-o Acquire::Retries=0 -o Acquire::http::Timeout=20 -o Acquire::https::Timeout=20"
    # shellcheck disable=SC2086 # options are words
    if ! { $SUDO apt-get $apt_opts update -q && \
        $SUDO apt-get $apt_opts install -y -q --no-install-recommends python3-venv; } >&2; then
        echo "plot-deps: could not install python3-venv with apt-get (no network, or not root?)" >&2
        exit 1
    fi
fi
echo "plot-deps: making $venv with matplotlib from PyPI" >&2
if ! python3 -m venv --clear "$venv" >&2; then
    echo "plot-deps: python3 -m venv failed (python3-venv missing?)" >&2
    exit 1
fi
if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check --timeout 20 --retries 1 \
    'matplotlib>=3.5' >&2 || ! has_mpl "$venv/bin/python"; then
    echo "plot-deps: pip could not install matplotlib into $venv (no network?)" >&2
    exit 1
fi
echo "$venv/bin/python"
