#!/usr/bin/env bash
# The Debian packages, end to end, on this machine (CI runs it as root, from
# scripts/test.sh): build tollgate with its runtime dependencies only
# (BUILD_TESTING=OFF), make the .debs with CPack, install them with dpkg, check
# what the package laid down (user, conffile, secret token, unit, man pages),
# verify the unit with systemd-analyze, run the installed binary as the
# package's user against the installed example config and the installed stub
# (a refund goes through, /readyz answers, SIGTERM exits 0), then remove and
# purge them and check that nothing but the store and the user is left.
# Usage: scripts/package-test.sh [--build|--test] [BUILD_DIR]   (default build-pkg)
#   --build: only build the .debs (and check their control data);
#   --test:  only install, run and remove the .debs an earlier --build made
#            in BUILD_DIR (scripts/test.sh builds them in the background
#            while the timing tests run, and tests them at the end);
#   neither: both, one after the other.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=1 TEST=1
case "${1:-}" in
  --build) TEST=0; shift ;;
  --test) BUILD=0; shift ;;
esac
DIR=${1:-build-pkg}
JOBS=$(nproc 2>/dev/null || echo 2)
say() { echo "== package: $*"; }
fail() { echo "package-test: FAIL: $*" >&2; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  say "skipped: installing a package needs root (CI runs as root)"
  exit 0
fi
if [ "$BUILD" -eq 1 ]; then
  say "build (BUILD_TESTING=OFF: no cmocka, no tests)"
  cmake -S . -B "$DIR" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
    -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
  cmake --build "$DIR" -j"$JOBS" >/dev/null
  [ ! -e "$DIR/tests" ] || [ -z "$(ls -A "$DIR/tests" 2>/dev/null)" ] || fail "tests were configured"
  rm -f "$DIR"/*.deb
  (cd "$DIR" && cpack -G DEB >/dev/null)
  DEB=$(ls "$DIR"/tollgate_*.deb)
  STUB_DEB=$(ls "$DIR"/tollgate-stub_*.deb)
  say "built $(basename "$DEB") $(basename "$STUB_DEB")"
  deps=$(dpkg-deb -f "$DEB" Depends)
  for lib in libcurl4 libsqlite3-0 libmicrohttpd12 libjansson4 libinih1 libssl3 libmariadb3 libsystemd0 adduser; do
    echo "$deps" | grep -q "$lib" || fail "Depends lacks $lib: $deps"
  done
  dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles | grep -qx /etc/tollgate/tollgate.ini \
    || fail "tollgate.ini is not a conffile"
  if dpkg-deb -c "$DEB" | grep -q '/tollgate-stub$'; then
    fail "tollgate-stub is in the tollgate package"
  fi
fi
[ "$TEST" -eq 1 ] || { say "built (install, run and remove: --test)"; exit 0; }

if dpkg-query -W -f='${Status}' tollgate 2>/dev/null | grep -q "install ok installed"; then
  fail "a tollgate package is installed already; remove it first (dpkg -P tollgate tollgate-stub)"
fi
if [ -e /var/lib/tollgate/tollgate.db ]; then
  fail "/var/lib/tollgate/tollgate.db exists (an earlier install's store): move it away first"
fi
for port in 8080 9099; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "127.0.0.1:$port is taken: the example config and the stub need it"
  fi
done
DEB=$(ls "$DIR"/tollgate_*.deb 2>/dev/null) || fail "no tollgate .deb in $DIR (run --build first)"
STUB_DEB=$(ls "$DIR"/tollgate-stub_*.deb 2>/dev/null) || fail "no tollgate-stub .deb in $DIR"

cleanup() {
  set +e
  [ -n "${TG_PID:-}" ] && kill "$TG_PID" 2>/dev/null
  [ -n "${STUB_PID:-}" ] && kill "$STUB_PID" 2>/dev/null
  wait 2>/dev/null
  dpkg -P tollgate tollgate-stub >/dev/null 2>&1
}
trap cleanup EXIT

say "install"
dpkg -i "$DEB" "$STUB_DEB" >/dev/null
getent passwd tollgate >/dev/null || fail "no tollgate user"
[ "$(stat -c '%U %a' /etc/tollgate/api-token)" = "tollgate 600" ] || fail "api-token not tollgate 600"
[ "$(stat -c '%U:%G %a' /var/lib/tollgate)" = "tollgate:tollgate 750" ] || fail "state dir"
man -w tollgate >/dev/null && man -w 5 tollgate.ini >/dev/null && man -w tollgate-stub >/dev/null \
  || fail "man pages missing"
systemd-analyze verify /lib/systemd/system/tollgate.service || fail "systemd-analyze verify"
tollgate --version | grep -q "^tollgate " || fail "tollgate --version"

say "run as the package's user, on the installed config, against the installed stub"
# setpriv execs the program itself (runuser would stand between it and the
# signals): $! is tollgate's own pid
AS_TOLLGATE=(setpriv --reuid tollgate --regid tollgate --init-groups --)
"${AS_TOLLGATE[@]}" tollgate config check --config /etc/tollgate/tollgate.ini
"${AS_TOLLGATE[@]}" tollgate-stub --listen 127.0.0.1:9099 --mode fast >/dev/null 2>&1 &
STUB_PID=$!
"${AS_TOLLGATE[@]}" tollgate serve --config /etc/tollgate/tollgate.ini 2>"$DIR/serve.log" &
TG_PID=$!
TOKEN=$(cat /etc/tollgate/api-token)
for _ in $(seq 100); do
  curl -fs http://127.0.0.1:8080/readyz >/dev/null && break
  sleep 0.1
done
curl -fsS http://127.0.0.1:8080/readyz | grep -q '"role":"owner"' || fail "readyz: $(cat "$DIR/serve.log")"
curl -fsS -H "Authorization: Bearer $TOKEN" \
  -d '{"operation_id":"pkg-1","payment_id":"pay-1","amount":100,"currency":"TWD"}' \
  -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/v1/refunds | grep -qx 202 || fail "submit"
for _ in $(seq 100); do
  curl -fs -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8080/v1/refunds/pkg-1 \
    | grep -q '"state":"succeeded"' && break
  sleep 0.1
done
curl -fs -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8080/v1/refunds/pkg-1 \
  | grep -q '"state":"succeeded"' || fail "the refund did not succeed: $(cat "$DIR/serve.log")"
[ "$(stat -c %U /var/lib/tollgate/tollgate.db)" = tollgate ] || fail "store not the user's"
kill -TERM "$TG_PID"
wait "$TG_PID" || fail "serve did not exit 0 on SIGTERM"
TG_PID=
kill "$STUB_PID"; wait "$STUB_PID" 2>/dev/null || true
STUB_PID=

say "remove and purge"
dpkg -r tollgate tollgate-stub >/dev/null
[ ! -e /usr/bin/tollgate ] && [ ! -e /usr/bin/tollgate-stub ] || fail "binaries left after remove"
[ -e /etc/tollgate/tollgate.ini ] || fail "remove (not purge) took the conffile"
dpkg -P tollgate tollgate-stub >/dev/null 2>&1
[ ! -e /etc/tollgate ] || fail "/etc/tollgate left after purge: $(ls -A /etc/tollgate)"
[ ! -e /lib/systemd/system/tollgate.service ] || fail "unit left after purge"
# kept on purpose: the store (a refund backlog) and the user
[ -e /var/lib/tollgate/tollgate.db ] || fail "purge deleted the store"
rm -rf /var/lib/tollgate
trap - EXIT
say "ok"
