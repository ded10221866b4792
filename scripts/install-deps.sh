#!/usr/bin/env bash
# Installs the Debian packages tollgate needs to build, test and run.
# Idempotent and quick when everything is present: apt is only called for
# packages that are missing.
# --bench-peers: also what bench/peers/ needs (redis-server for BullMQ; Node.js
# and npm come with the machine), which nothing else, CI included, needs.
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config clang clang-format cppcheck
  libcurl4-openssl-dev libsqlite3-dev sqlite3 libmariadb-dev mariadb-server mariadb-client
  libmicrohttpd-dev libjansson-dev libinih-dev libssl-dev libcmocka-dev
  python3 curl procps psmisc
)
if [ "${1:-}" = "--bench-peers" ]; then
  PKGS+=(redis-server)
fi
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
