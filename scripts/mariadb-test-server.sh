#!/usr/bin/env bash
# Starts a private MariaDB server for the tests: its own datadir, socket and a
# loopback port, no systemd. Sourced by scripts/test.sh; exports
# TG_TEST_MYSQL_URL for the tests that run against MariaDB. Tests that need it
# skip themselves (and say so) when the variable is unset.
MARIADB_TEST_DIR=""
MARIADB_TEST_PID=""

mariadb_test_server_start() {
  if ! command -v mariadbd >/dev/null 2>&1 && ! command -v mysqld >/dev/null 2>&1; then
    echo "mariadb-test-server: no mariadbd; MariaDB tests will be skipped" >&2
    return 0
  fi
  local bin; bin=$(command -v mariadbd || command -v mysqld)
  MARIADB_TEST_DIR=$(mktemp -d /tmp/tollgate-mariadb.XXXXXX)
  local port=${TG_TEST_MYSQL_PORT:-33061}
  mariadb-install-db --no-defaults --datadir="$MARIADB_TEST_DIR/data" --user="$(id -un)" \
    --auth-root-authentication-method=normal >"$MARIADB_TEST_DIR/install.log" 2>&1 || {
      echo "mariadb-test-server: install-db failed, see $MARIADB_TEST_DIR/install.log" >&2; return 1; }
  # its own tmpdir: a mariadbd starting up deletes every "#sql*" file in its
  # tmpdir, and the tests' private servers (tgmariadb.py) start beside this one
  mkdir -p "$MARIADB_TEST_DIR/tmp"
  "$bin" --no-defaults --datadir="$MARIADB_TEST_DIR/data" --socket="$MARIADB_TEST_DIR/sock" \
    --port="$port" --bind-address=127.0.0.1 --user="$(id -un)" --skip-grant-tables=0 \
    --tmpdir="$MARIADB_TEST_DIR/tmp" \
    --innodb-buffer-pool-size=128M --pid-file="$MARIADB_TEST_DIR/pid" \
    >"$MARIADB_TEST_DIR/server.log" 2>&1 &
  MARIADB_TEST_PID=$!
  for _ in $(seq 1 100); do
    if mariadb --no-defaults -S "$MARIADB_TEST_DIR/sock" -uroot -e 'select 1' >/dev/null 2>&1; then
      break
    fi
    # died at once (say, the port is taken by another run): stop waiting
    kill -0 "$MARIADB_TEST_PID" 2>/dev/null || break
    sleep 0.2
  done
  mariadb --no-defaults -S "$MARIADB_TEST_DIR/sock" -uroot -e "
    CREATE USER IF NOT EXISTS 'tollgate'@'127.0.0.1' IDENTIFIED BY 'tollgate';
    GRANT ALL ON \`tollgate_test%\`.* TO 'tollgate'@'127.0.0.1';
    CREATE DATABASE IF NOT EXISTS tollgate_test;" || {
      echo "mariadb-test-server: server did not come up on port $port:" >&2
      tail -5 "$MARIADB_TEST_DIR/server.log" >&2
      # the caller's EXIT trap is not set yet: leave nothing running
      mariadb_test_server_stop; MARIADB_TEST_PID=""; MARIADB_TEST_DIR=""; return 1; }
  export TG_TEST_MYSQL_URL="mysql://tollgate:tollgate@127.0.0.1:$port/tollgate_test"
  export TG_TEST_MYSQL_SOCKET="$MARIADB_TEST_DIR/sock"
  echo "mariadb-test-server: up on 127.0.0.1:$port" >&2
}

mariadb_test_server_stop() {
  if [ -n "$MARIADB_TEST_PID" ]; then
    kill "$MARIADB_TEST_PID" 2>/dev/null || true
    wait "$MARIADB_TEST_PID" 2>/dev/null || true
  fi
  if [ -n "$MARIADB_TEST_DIR" ]; then
    rm -rf "$MARIADB_TEST_DIR"
  fi
}
