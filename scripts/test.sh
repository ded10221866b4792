#!/usr/bin/env bash
# The whole test suite, as the README's second command and CI run it:
#   1. install missing Debian packages;
#   2. Release build (-Werror) and every test (unit, fuzz corpus replay, integration);
#   3. ASan+UBSan build: every unit test and fuzz corpus, and the integration
#      tests labelled sanitize;
#   4. format check (clang-format) and static analysis (cppcheck) of src/;
#   5. the .deb packages built, installed, run and removed (scripts/package-test.sh).
# Usage: scripts/test.sh [--quick]   (--quick skips the sanitizer build)
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1

./scripts/install-deps.sh
JOBS=$(nproc 2>/dev/null || echo 2)

# A private MariaDB for the store tests that need one (removed on exit).
# shellcheck source=scripts/mariadb-test-server.sh
source ./scripts/mariadb-test-server.sh
mariadb_test_server_start
# ... and a private PostgreSQL (TG_TEST_PG_URL), removed on exit as well.
# shellcheck source=scripts/pg-test-server.sh
source ./scripts/pg-test-server.sh
pg_test_server_start
trap 'mariadb_test_server_stop; pg_test_server_stop' EXIT

run_suite() { # build-dir, integration label (all: every one), extra cmake args...
  local dir=$1 label=$2; shift 2
  echo "== configure+build $dir $*"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$dir" -j"$JOBS" 2>&1 | grep -v '^\[' || true
  cmake --build "$dir" -j"$JOBS" >/dev/null   # fail here if the build failed
  echo "== tests $dir"
  # Unit and fuzz replays in parallel; integration tests one at a time, since
  # they judge timing against real processes on a 2-core machine.
  ctest --test-dir "$dir" -j"$JOBS" -LE integration --output-on-failure
  if [ "$label" = all ]; then
    ctest --test-dir "$dir" -L integration --output-on-failure
  else
    ctest --test-dir "$dir" -L integration -L "$label" --output-on-failure
  fi
}

run_suite build all
if [ "$QUICK" -eq 0 ]; then
  # The sanitizer pass runs every unit test and fuzz corpus, and the
  # integration tests labelled "sanitize" (tests/CMakeLists.txt): each real
  # process and path once, not every variant the Release pass ran (the
  # MariaDB and TLS repeats of the same scenarios, the browser, the demo).
  echo "== the sanitizer pass: unit, fuzz, and the integration tests labelled sanitize"
  TG_SKIP_BROWSER_TESTS=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    run_suite build-asan sanitize -DTG_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi

echo "== format check"
mapfile -t files < <(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'tests/*.h' 'bench/*.c' 2>/dev/null || find src tests bench -name '*.[ch]')
if [ ${#files[@]} -gt 0 ]; then
  clang-format --dry-run --Werror "${files[@]}"
fi

echo "== static analysis (cppcheck)"
cppcheck --quiet --error-exitcode=1 --std=c11 --enable=warning,portability \
  --inline-suppr --suppress=missingIncludeSystem -I src src
echo "== the Debian packages: build (BUILD_TESTING=OFF), install, run as the package's user, remove"
./scripts/package-test.sh build-pkg
echo "== all checks passed"
