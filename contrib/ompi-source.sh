#!/bin/sh
# contrib/ompi-source.sh: the headers of Open MPI's source tree for the
# installed Debian package libopenmpi-dev, for configure's
# --with-ompi-source=DIR. Debian 13 (5.0.7) and testing (6.0.0~rc2) ship
# opal_config.h without the component headers it names
# (opal/mca/threads/pthreads/*.h, opal/mca/timer/linux/timer_linux.h); their
# source package has them. Prints the tree's path on its last line.
#
# Fetches Debian's source package of the installed version (apt-get source,
# through a private list of deb-src lines made from apt's own sources, so the
# system's configuration is left alone) into $GPUCOLL_CACHE/ompi-source
# (default /var/cache/gpucoll). Where the mirror does not serve that version's
# source (Debian testing's 6.0.0~rc2 at the time of writing), it takes the
# newest version it serves and says so: configure takes only the headers the
# installation lacks from it, and the four above are the same in 5.0.7 and
# 6.0 (checked against Open MPI's v5.0.7 tag and v6.0.x branch).
set -eu
cache=${GPUCOLL_CACHE:-/var/cache/gpucoll}/ompi-source
ver=$(dpkg-query -W -f='${Version}' libopenmpi-dev 2>/dev/null) || {
    echo "ompi-source: libopenmpi-dev is not installed (this script is for Debian's Open MPI)" >&2
    exit 1
}
up=${ver#*:}
up=${up%-*}
tree=$cache/openmpi-$up
if [ -f "$tree/ompi/mca/coll/coll.h" ]; then
    echo "$tree"
    exit 0
fi
mkdir -p "$cache/apt/lists/partial"
work=$(mktemp -d "$cache/fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT

# deb-src twins of apt's deb sources (deb822 and one-line formats).
list=$cache/apt/sources.list
: >"$list"
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '/^URIs:/ {u=$2} /^Suites:/ {for (i = 2; i <= NF; i++) s[i-1]=$i; n=NF-1}
         /^Components:/ {c=""; for (i = 2; i <= NF; i++) c=c" "$i}
         /^$/ {if (u != "") for (i = 1; i <= n; i++) print "deb-src " u " " s[i] c; u=""; n=0}
         END {if (u != "") for (i = 1; i <= n; i++) print "deb-src " u " " s[i] c}' "$f" >>"$list"
done
[ -f /etc/apt/sources.list ] &&
    sed -n -e 's/^deb \(.*\)/deb-src \1/p' -e '/^deb-src /p' /etc/apt/sources.list >>"$list"
sort -u "$list" -o "$list"
grep -v -e security -e updates "$list" >"$list.new" || :
mv "$list.new" "$list"
apt_opts="-o Dir::Etc::SourceList=$list -o Dir::Etc::SourceParts=/dev/null \
-o Dir::State::Lists=$cache/apt/lists -o APT::Sandbox::User=root -o Acquire::Check-Valid-Until=false"
# shellcheck disable=SC2086 # apt_opts: words
apt-get $apt_opts update -q >"$work/update.log" 2>&1 || {
    cat "$work/update.log" >&2
    echo "ompi-source: apt-get update of the deb-src lines failed" >&2
    exit 1
}
# The installed version first, then every other version served, newest first.
# shellcheck disable=SC2086
versions=$(apt-cache $apt_opts showsrc openmpi 2>/dev/null | sed -n 's/^Version: //p' |
    sort -r -V | grep -v -x -F "$ver" || :)
got=""
for v in "$ver" $versions; do
    # shellcheck disable=SC2086
    if (cd "$work" && apt-get $apt_opts source --download-only -q "openmpi=$v") \
        >"$work/source.log" 2>&1; then
        got=$v
        break
    fi
    echo "ompi-source: Debian's source of openmpi $v is not served here" >&2
done
[ -n "$got" ] || { echo "ompi-source: no source of openmpi could be fetched" >&2; exit 1; }
orig=$(ls "$work"/openmpi_*.orig.tar.* | head -1)
# Headers only (and VERSION): what configure reads.
tar -C "$work" -xf "$orig" --wildcards '*.h' '*/VERSION'
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'openmpi-*' | head -1)
[ -f "$src/ompi/mca/coll/coll.h" ] || { echo "ompi-source: $orig has no ompi/mca/coll/coll.h" >&2; exit 1; }
if [ "$got" != "$ver" ]; then
    echo "ompi-source: WARNING: using the headers of openmpi $got for the installed $ver" >&2
    echo "$got" >"$src/.gpucoll-source-version"
fi
rm -rf "$tree"
mv "$src" "$tree"
echo "$tree"
