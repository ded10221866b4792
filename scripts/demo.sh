#!/usr/bin/env bash
# The demo: installs what is missing, builds, and shows the exit at work.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
exec ./build/tollgate demo "$@"
