#!/usr/bin/env bash
# Starts a private PostgreSQL 15 cluster for the tests: initdb + pg_ctl in a
# temp dir, a loopback port (TG_TEST_PG_PORT, default 54329), its unix socket
# in the temp dir, no systemd; removed by pg_test_server_stop. Sourced by
# scripts/test.sh; exports TG_TEST_PG_URL for the tests that run against
# PostgreSQL. Tests that need it skip themselves (and say so) when the
# variable is unset. initdb refuses to run as root: as root, the cluster
# runs as `nobody` (its files are in the temp dir, owned by it).
PG_TEST_DIR=""
PG_TEST_USER=""
PG_TEST_BIN=""

pg_test_server_run() {
  # a command as the cluster's owner
  if [ -n "$PG_TEST_USER" ]; then
    runuser -u "$PG_TEST_USER" -- "$@"
  else
    "$@"
  fi
}

pg_test_server_start() {
  PG_TEST_BIN=""
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then PG_TEST_BIN=$d; break; fi
  done
  if [ -z "$PG_TEST_BIN" ] && command -v initdb >/dev/null 2>&1; then
    PG_TEST_BIN=$(dirname "$(command -v initdb)")
  fi
  if [ -z "$PG_TEST_BIN" ]; then
    echo "pg-test-server: no initdb; PostgreSQL tests will be skipped" >&2
    return 0
  fi
  local port=${TG_TEST_PG_PORT:-54329}
  PG_TEST_DIR=$(mktemp -d /tmp/tollgate-pg.XXXXXX)
  PG_TEST_USER=""
  if [ "$(id -u)" -eq 0 ]; then
    PG_TEST_USER=nobody
    chown "$PG_TEST_USER" "$PG_TEST_DIR"
  fi
  chmod 700 "$PG_TEST_DIR"
  printf 'postgres\n' >"$PG_TEST_DIR/pw"
  [ -z "$PG_TEST_USER" ] || chown "$PG_TEST_USER" "$PG_TEST_DIR/pw"
  # local (socket) connections trusted, TCP ones by password: the tests
  # connect as tollgate over TCP, as a deployment does
  pg_test_server_run "$PG_TEST_BIN/initdb" -D "$PG_TEST_DIR/data" -U postgres \
    --pwfile="$PG_TEST_DIR/pw" --auth-local=trust --auth-host=scram-sha-256 -E UTF8 \
    --no-locale >"$PG_TEST_DIR/initdb.log" 2>&1 || {
      echo "pg-test-server: initdb failed, see $PG_TEST_DIR/initdb.log" >&2
      tail -5 "$PG_TEST_DIR/initdb.log" >&2; return 1; }
  # a private test cluster: no fsync (it is removed afterwards)
  pg_test_server_run "$PG_TEST_BIN/pg_ctl" -D "$PG_TEST_DIR/data" -l "$PG_TEST_DIR/server.log" \
    -w -t 30 -o "-p $port -k $PG_TEST_DIR -c listen_addresses=127.0.0.1 -c fsync=off \
    -c max_connections=200" start >/dev/null 2>&1 || {
      echo "pg-test-server: server did not come up on port $port:" >&2
      tail -5 "$PG_TEST_DIR/server.log" >&2
      pg_test_server_stop; PG_TEST_DIR=""; return 1; }
  "$PG_TEST_BIN/psql" -X -q -h "$PG_TEST_DIR" -p "$port" -U postgres -d postgres \
    -v ON_ERROR_STOP=1 -c "CREATE ROLE tollgate LOGIN CREATEDB PASSWORD 'tollgate'" \
    -c "CREATE DATABASE tollgate_test OWNER tollgate" >/dev/null || {
      echo "pg-test-server: could not create the test role on port $port" >&2
      pg_test_server_stop; PG_TEST_DIR=""; return 1; }
  export TG_TEST_PG_URL="postgresql://tollgate:tollgate@127.0.0.1:$port/tollgate_test"
  export TG_TEST_PG_SOCKET="$PG_TEST_DIR"
  echo "pg-test-server: up on 127.0.0.1:$port" >&2
}

pg_test_server_stop() {
  if [ -n "$PG_TEST_DIR" ] && [ -d "$PG_TEST_DIR/data" ]; then
    pg_test_server_run "$PG_TEST_BIN/pg_ctl" -D "$PG_TEST_DIR/data" -m fast -w stop \
      >/dev/null 2>&1 || true
  fi
  if [ -n "$PG_TEST_DIR" ]; then
    rm -rf "$PG_TEST_DIR"
  fi
}
