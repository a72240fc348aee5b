#!/usr/bin/env bash
# Installs the Debian 12 packages dwell builds with, if any is missing
# (opencl-c-headers to build the opencl plugin, PoCL and the OpenCL ICD
# loader ocl-icd-libopencl1 (only a Recommends of PoCL, which
# --no-install-recommends leaves out) to run it in tests,
# clang to parse its Adreno kernels; clang, lld and qemu-user to build and
# run the Hexagon DSP kernels under emulation; a JDK for the JNI binding and
# its Java test; cpp-httplib for the server; libssl-dev for hashing
# pinned plugins; node and npm for the
# OpenAI-client test); python3-jinja2 renders the reference chat templates.
# Runs apt-get only when needed (as root, or through sudo).
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config ccache binutils
  libboost-dev libboost-program-options-dev
  libspdlog-dev libfmt-dev libzstd-dev libxxhash-dev libsentencepiece-dev libtomlplusplus-dev
  libpcre2-dev
  libgtest-dev libgmock-dev nlohmann-json3-dev libssl-dev
  opencl-c-headers pocl-opencl-icd ocl-icd-libopencl1 clang lld qemu-user
  openjdk-17-jdk-headless libcpp-httplib-dev python3-jinja2
)
# node and npm drive the server test with the official openai client; a
# machine that has them from elsewhere (e.g. NodeSource) keeps its own.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "dwell: installing missing packages: ${missing[*]}" >&2
as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
