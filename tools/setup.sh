#!/usr/bin/env bash
# Install what SDR needs from Debian's packages (as root, or through sudo), configure ./build and
# build what the demo needs (libsdr and sdr_demo); `cmake --build build` builds the rest. Extra
# CMake options may be passed as arguments (e.g. -DSDR_WERROR=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
export DEBIAN_FRONTEND=noninteractive
as_root apt-get update -qq
as_root apt-get install -y -qq --no-install-recommends $(cat .ci/packages) >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j"$(nproc)" --target sdr_demo
