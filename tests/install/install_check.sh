#!/usr/bin/env bash
# install_check.sh BUILD_DIR: installs the build into a fresh prefix outside it and runs
# check_install.sh there (what .ci/run does after the suite).
set -euo pipefail
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig" \
  "$(dirname "$0")/check_install.sh" "$prefix"
