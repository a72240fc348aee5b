# Cross-compiling for aarch64 on Debian with g++-aarch64-linux-gnu and the
# arm64 multiarch -dev packages (see scripts/test-aarch64.sh, which also
# installs them). Tests run under qemu-aarch64; -cpu max gives them the
# dotprod and i8mm extensions the NEON kernels need.
#
#   cmake -B build-aarch64 -G Ninja \
#     -DCMAKE_TOOLCHAIN_FILE=sdk/cmake/toolchains/aarch64-linux-gnu.cmake
#
# DWELL_AARCH64_EXTRA_ROOT (cache variable or environment): a folder holding
# arm64 packages unpacked by hand (usr/...), for those Debian cannot install
# next to their amd64 twins (no Multi-Arch: same, e.g. libsentencepiece-dev).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

if(NOT DEFINED DWELL_AARCH64_EXTRA_ROOT AND DEFINED ENV{DWELL_AARCH64_EXTRA_ROOT})
  set(DWELL_AARCH64_EXTRA_ROOT "$ENV{DWELL_AARCH64_EXTRA_ROOT}")
endif()
set(DWELL_AARCH64_EXTRA_ROOT "${DWELL_AARCH64_EXTRA_ROOT}" CACHE PATH
    "Folder with arm64 packages unpacked outside the system (optional)")
# try_compile re-reads this file in the same process, and would otherwise
# reset PKG_CONFIG_LIBDIR below without the extra root.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES DWELL_AARCH64_EXTRA_ROOT)

# Multiarch keeps arm64 libraries in /usr/lib/aarch64-linux-gnu under the
# host's own root, so "/" must stay a root; CMAKE_LIBRARY_ARCHITECTURE keeps
# the searches out of /usr/lib/x86_64-linux-gnu. Host programs (qemu,
# pkg-config) come from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
if(DWELL_AARCH64_EXTRA_ROOT)
  list(PREPEND CMAKE_FIND_ROOT_PATH "${DWELL_AARCH64_EXTRA_ROOT}")
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Only arm64 .pc files (plus the architecture-independent ones).
set(_dwell_pc_libdir /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
if(DWELL_AARCH64_EXTRA_ROOT)
  set(_dwell_pc_libdir
      "${DWELL_AARCH64_EXTRA_ROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${_dwell_pc_libdir}")
endif()
set(ENV{PKG_CONFIG_LIBDIR} "${_dwell_pc_libdir}")
unset(ENV{PKG_CONFIG_PATH})

# ctest (add_test, gtest_discover_tests) and the tests that start a built
# binary run aarch64 executables through this. With the arm64 libc6
# installed (a dependency of the -dev packages) its loader is at
# /lib/ld-linux-aarch64.so.1 and qemu needs no prefix; -L would pick the
# cross libc6's loader there, which must not meet the multiarch libc.so.6
# it then finds (a different build: crashes at exit). Without it, -L
# supplies the cross loader and libraries.
if(EXISTS /lib/ld-linux-aarch64.so.1)
  set(CMAKE_CROSSCOMPILING_EMULATOR "qemu-aarch64;-cpu;max")
else()
  set(CMAKE_CROSSCOMPILING_EMULATOR "qemu-aarch64;-cpu;max;-L;/usr/aarch64-linux-gnu")
endif()
