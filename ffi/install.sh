#!/usr/bin/env bash
# Installs the C library of rocketmq-blocking into a prefix: the shared library with its
# soname and links, the static library, the header, a pkg-config file and a CMake package.
#
#   ffi/install.sh [--compat] [--prefix DIR] [--libdir DIR] [--includedir DIR]
#                  [--profile release|debug] [--no-build] [--destdir DIR]
#
# Defaults: --prefix /usr/local, --libdir PREFIX/lib, --includedir PREFIX/include, the
# release profile. --no-build installs what the profile's last build left in the target
# directory. --destdir stages the files under DIR (for packagers); the paths written into
# the .pc and CMake files stay those of the prefix. Then, for example:
#
#   cc app.c $(pkg-config --cflags --libs rocketmq-blocking)
#   find_package(rocketmq-blocking 0.1 REQUIRED)   # target rocketmq-blocking::rocketmq-blocking
#
# --compat installs the drop-in for rocketmq-client-cpp 2.2.0 (compat/) instead, where that
# library's `make install` put it: librocketmq.so (its soname, which the Python client
# needs) linked to librocketmq.so.2.2.0, the C headers under INCLUDEDIR/rocketmq/, and
# rocketmq.pc (Cflags name both INCLUDEDIR/rocketmq and INCLUDEDIR, so `#include
# "CProducer.h"` and `#include <rocketmq/CProducer.h>` both work):
#
#   cc app.c $(pkg-config --cflags --libs rocketmq)
#   LD_LIBRARY_PATH=PREFIX/lib python3 app.py    # rocketmq-client-python 2.0.0
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

prefix=/usr/local
libdir=
includedir=
profile=release
build=1
destdir=
compat=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --libdir) libdir=$2; shift 2 ;;
    --includedir) includedir=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --destdir) destdir=$2; shift 2 ;;
    --compat) compat=1; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
libdir=${libdir:-$prefix/lib}
includedir=${includedir:-$prefix/include}

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/ffi/Cargo.toml" | head -n 1)
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}
# As ffi/build.rs sets it: 0.x minors may break the ABI.
if [ "$major" = 0 ]; then soversion="0.$minor"; else soversion="$major"; fi

# Builds package $1 (unless --no-build) and checks the files $2... are in $out.
built() {
  local package=$1; shift
  if [ "$build" = 1 ]; then
    case "$profile" in debug) cargo_profile=dev ;; *) cargo_profile=$profile ;; esac
    cargo build --manifest-path "$root/Cargo.toml" -p "$package" --profile "$cargo_profile" --locked
  fi
  local target=${CARGO_TARGET_DIR:-$root/target}
  case "$profile" in dev|debug) out="$target/debug" ;; *) out="$target/$profile" ;; esac
  for f in "$@"; do
    [ -f "$out/$f" ] || { echo "install.sh: $out/$f is missing; build first or drop --no-build" >&2; exit 1; }
  done
}

lib="$destdir$libdir"
inc="$destdir$includedir"

if [ "$compat" = 1 ]; then
  # The C API version the drop-in implements, in the file name; the soname stays
  # librocketmq.so as the original's (compat/build.rs).
  api=2.2.0
  built rocketmq-compat librocketmq.so
  mkdir -p "$lib/pkgconfig" "$inc/rocketmq"
  install -m 0755 "$out/librocketmq.so" "$lib/librocketmq.so.$api"
  ln -sf "librocketmq.so.$api" "$lib/librocketmq.so"
  install -m 0644 "$root"/compat/include/*.h "$inc/rocketmq/"
  cat > "$lib/pkgconfig/rocketmq.pc" <<PC
prefix=$prefix
libdir=$libdir
includedir=$includedir

Name: rocketmq
Description: C API of Apache rocketmq-client-cpp $api on rocketmq-blocking (drop-in librocketmq)
Version: $api
Libs: -L\${libdir} -lrocketmq
Cflags: -I\${includedir}/rocketmq -I\${includedir}
PC
  echo "installed librocketmq (rocketmq-client-cpp $api C API) into $destdir$prefix (libdir $libdir, soname librocketmq.so)"
  exit 0
fi

built rocketmq-blocking-ffi librocketmq_blocking.so librocketmq_blocking.a
mkdir -p "$lib/pkgconfig" "$lib/cmake/rocketmq-blocking" "$inc"
install -m 0755 "$out/librocketmq_blocking.so" "$lib/librocketmq_blocking.so.$version"
ln -sf "librocketmq_blocking.so.$version" "$lib/librocketmq_blocking.so.$soversion"
ln -sf "librocketmq_blocking.so.$soversion" "$lib/librocketmq_blocking.so"
install -m 0644 "$out/librocketmq_blocking.a" "$lib/librocketmq_blocking.a"
install -m 0644 "$root/ffi/include/rocketmq_blocking.h" "$inc/rocketmq_blocking.h"

# What a Rust static library needs from the system (rustc --print native-static-libs).
static_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"

cat > "$lib/pkgconfig/rocketmq-blocking.pc" <<PC
prefix=$prefix
libdir=$libdir
includedir=$includedir

Name: rocketmq-blocking
Description: C library of rocketmq-blocking, an Apache RocketMQ client (remoting protocol)
Version: $version
Libs: -L\${libdir} -lrocketmq_blocking
Libs.private: $static_libs
Cflags: -I\${includedir}
PC

cat > "$lib/cmake/rocketmq-blocking/rocketmq-blocking-config.cmake" <<CMAKE
# rocketmq-blocking $version: rocketmq-blocking::rocketmq-blocking (shared) and
# rocketmq-blocking::static.
if(NOT TARGET rocketmq-blocking::rocketmq-blocking)
  add_library(rocketmq-blocking::rocketmq-blocking SHARED IMPORTED)
  set_target_properties(rocketmq-blocking::rocketmq-blocking PROPERTIES
    IMPORTED_LOCATION "$libdir/librocketmq_blocking.so.$version"
    IMPORTED_SONAME "librocketmq_blocking.so.$soversion"
    INTERFACE_INCLUDE_DIRECTORIES "$includedir")
endif()
if(NOT TARGET rocketmq-blocking::static)
  add_library(rocketmq-blocking::static STATIC IMPORTED)
  set_target_properties(rocketmq-blocking::static PROPERTIES
    IMPORTED_LOCATION "$libdir/librocketmq_blocking.a"
    INTERFACE_INCLUDE_DIRECTORIES "$includedir"
    INTERFACE_LINK_LIBRARIES "gcc_s;util;rt;pthread;m;dl;c")
endif()
set(rocketmq-blocking_VERSION "$version")
CMAKE

cat > "$lib/cmake/rocketmq-blocking/rocketmq-blocking-config-version.cmake" <<CMAKE
# Compatible with a request for the same major version (for 0.x: the same minor) that is
# not newer than this one.
set(PACKAGE_VERSION "$version")
set(PACKAGE_VERSION_COMPATIBLE FALSE)
if(PACKAGE_FIND_VERSION_MAJOR EQUAL $major AND NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  if(NOT $major EQUAL 0 OR PACKAGE_FIND_VERSION_MINOR EQUAL $minor)
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
endif()
if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
  set(PACKAGE_VERSION_EXACT TRUE)
endif()
CMAKE

echo "installed rocketmq-blocking $version into $destdir$prefix (libdir $libdir, soname librocketmq_blocking.so.$soversion)"
