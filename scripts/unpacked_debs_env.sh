# Source this on a machine where the build's Debian packages cannot be installed (no root, no
# network): it unpacks the .deb files of a folder (default .debs/, e.g. filled beforehand with
# `apt-get download` of the packages .ci/run installs) into a private prefix and points the
# compiler, CMake, pkg-config and the loader there.
#   . scripts/unpacked_debs_env.sh [DEBS_DIR]
debs=${1:-.debs}
prefix=${DUET_DEBS_PREFIX:-/tmp/duet-debs}
mkdir -p "$prefix"
for f in "$debs"/*.deb; do dpkg -x "$f" "$prefix"; done
lib=$prefix/usr/lib/x86_64-linux-gnu
# The packages' own files name /usr: make them name the prefix.
sed -i "s#prefix=/usr#prefix=$prefix/usr#" "$lib"/cmake/GTest/*.cmake 2>/dev/null
for pc in "$lib"/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc; do
  [ -f "$pc" ] && sed -i "s#^prefix=/usr#prefix=$prefix/usr#; s#^libdir=/usr#libdir=$prefix/usr#; s#^includedir=/usr#includedir=$prefix/usr#" "$pc"
done
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$prefix/usr/share/pkgconfig
export PKG_CONFIG=$prefix/usr/bin/pkgconf
export CMAKE_PREFIX_PATH=$prefix/usr
export CPATH=$prefix/usr/include${CPATH:+:$CPATH}
