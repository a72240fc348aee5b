#!/usr/bin/env bash
# Cross-builds dwell for aarch64 with Debian's g++-aarch64-linux-gnu and the
# arm64 multiarch -dev packages, then runs the test suite under
# qemu-aarch64 -cpu max (which has NEON, dotprod and i8mm, so every SIMD
# level's kernels run).
#   scripts/test-aarch64.sh        Release build in build-aarch64/
# Installs what is missing first (apt-get, as root or through sudo). Extra
# arguments go to ctest (e.g. -R Simd, -L kernels).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DWELL_AARCH64_BUILD_DIR:-$root/build-aarch64}
mkdir -p "$build"
build=$(cd "$build" && pwd)  # baked into a .pc file and RPATHs below

"$root/scripts/install-deps.sh"

as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
export DEBIAN_FRONTEND=noninteractive

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

host_packages=(g++-aarch64-linux-gnu qemu-user)
# Multi-Arch: same, so the arm64 builds sit next to the amd64 ones.
# nlohmann-json3-dev is Multi-Arch: foreign (header-only, arch all): the
# host's copy serves. libsentencepiece-dev/libsentencepiece0 are not
# Multi-Arch at all, so installing them for arm64 would remove the amd64
# ones; they are unpacked into the build folder below instead.
arm64_packages=(
  libboost-dev libboost-program-options-dev libspdlog-dev libfmt-dev libzstd-dev
  libxxhash-dev libtomlplusplus-dev libgtest-dev libgmock-dev libcpp-httplib-dev libpcre2-dev
  libssl-dev
)

missing=()
for p in "${host_packages[@]}"; do installed "$p" || missing+=("$p"); done
for p in "${arm64_packages[@]}"; do installed "$p:arm64" || missing+=("$p:arm64"); done
if [ ${#missing[@]} -ne 0 ]; then
  echo "dwell: installing missing packages: ${missing[*]}" >&2
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    "${as_root[@]}" dpkg --add-architecture arm64
  fi
  "${as_root[@]}" apt-get update -qq
  # Multi-Arch: same packages must have one version on both architectures,
  # so apt may upgrade amd64 packages to match; it must never remove one.
  if "${as_root[@]}" apt-get install -s --no-install-recommends "${missing[@]}" | grep '^Remv'; then
    echo "dwell: installing ${missing[*]} would remove the packages above; stopping" >&2
    exit 1
  fi
  "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

extra_root=$build/arm64-root
if [ ! -e "$extra_root/usr/lib/aarch64-linux-gnu/libsentencepiece.so.0" ]; then
  download=$(mktemp -d)
  trap 'rm -rf "$download"' EXIT
  # apt's sandbox user must be able to write the download folder.
  chmod 755 "$download"
  (cd "$download" && apt-get download -qq libsentencepiece-dev:arm64 libsentencepiece0:arm64 \
    2> >(grep -v 'unsandboxed as root' >&2))
  mkdir -p "$extra_root"
  for deb in "$download"/*.deb; do dpkg-deb -x "$deb" "$extra_root"; done
  sed -i "s|^prefix=.*|prefix=$extra_root/usr|" \
    "$extra_root/usr/lib/aarch64-linux-gnu/pkgconfig/sentencepiece.pc"
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$root/sdk/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DDWELL_AARCH64_EXTRA_ROOT="$extra_root" >/dev/null
cmake --build "$build"
# Each qemu process emulates one guest CPU per thread; more jobs than cores
# only adds contention.
DWELL_SKIP_ALLOWLIST_EXTRA=$root/tests/skip_allowlist_emulated.txt \
  "$root/scripts/ctest_with_skip_report.sh" "$build" "$@"
