#!/usr/bin/env bash
# Installs the Debian packages tollgate needs to build, test and run, and the
# console's npm packages (web/package-lock.json: uPlot, compiled into the
# binary; puppeteer-core, which drives Debian's chromium in the browser
# tests and never downloads a browser).
# Idempotent and quick when everything is present: apt is only called for
# packages that are missing, npm only when web/node_modules is out of date.
# --bench-peers: also what bench/peers/ needs (redis-server for BullMQ; Node.js
# and npm come with the machine), which nothing else, CI included, needs.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(
  build-essential cmake pkg-config clang clang-format cppcheck
  libcurl4-openssl-dev libsqlite3-dev sqlite3 libmariadb-dev mariadb-server mariadb-client
  postgresql-15 postgresql-client-15 libpq-dev
  libmicrohttpd-dev libgnutls28-dev libjansson-dev libinih-dev libssl-dev libcmocka-dev openssl
  python3 curl procps psmisc
  # issue 13: sd_notify, man pages, packages, unit checks, alert rules, openapi check
  libsystemd-dev help2man scdoc dpkg-dev file fakeroot systemd man-db
  python3-yaml python3-jsonschema
  chromium fonts-wqy-microhei
)
# node and npm: Debian's, unless a node is already installed (a NodeSource
# node brings its own npm, which Debian's npm package would conflict with).
if ! command -v node >/dev/null 2>&1; then PKGS+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then PKGS+=(npm); fi
if [ "${1:-}" = "--bench-peers" ]; then
  PKGS+=(redis-server)
fi
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# promtool (alert rules: check and unit tests) from Debian's prometheus
# package, without installing the package: that would start a Prometheus
# server on :9090 on a machine that runs systemd. Extracted into
# .tools/bin (scripts/test.sh puts it on PATH).
TOOLS="$(cd "$(dirname "$0")/.." && pwd)/.tools"
if ! command -v promtool >/dev/null && [ ! -x "$TOOLS/bin/promtool" ]; then
  echo "install-deps: promtool from Debian's prometheus package into $TOOLS/bin" >&2
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1) || {
    $SUDO apt-get update -qq
    (cd "$tmp" && apt-get download prometheus >/dev/null)
  }
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
  mkdir -p "$TOOLS/bin"
  install -m 755 "$tmp/x/usr/bin/promtool" "$TOOLS/bin/promtool"
  rm -rf "$tmp"
fi

# The console's npm packages, exactly as the lockfile pins them.
if [ ! -f web/node_modules/.package-lock.json ] ||
   [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
  echo "install-deps: npm ci in web/ (uPlot, puppeteer-core)" >&2
  (cd web && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
