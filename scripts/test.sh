#!/usr/bin/env bash
# The whole test suite, as the README's second command and CI run it:
#   1. install missing Debian packages;
#   2. Release build (-Werror) and every test (unit, fuzz corpus replay, integration);
#   3. ASan+UBSan build and every test again;
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
trap mariadb_test_server_stop EXIT

run_suite() { # build-dir, extra cmake args...
  local dir=$1; shift
  echo "== configure+build $dir $*"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$dir" -j"$JOBS" 2>&1 | grep -v '^\[' || true
  cmake --build "$dir" -j"$JOBS" >/dev/null   # fail here if the build failed
  echo "== tests $dir"
  # Unit and fuzz replays in parallel; integration tests one at a time, since
  # they judge timing against real processes on a 2-core machine.
  ctest --test-dir "$dir" -j"$JOBS" -LE integration --output-on-failure
  ctest --test-dir "$dir" -L integration --output-on-failure
}

run_suite build
if [ "$QUICK" -eq 0 ]; then
  # The browser tests (it.test_console) ran in the Release pass; a browser
  # adds nothing to what the sanitizers check in the daemon, and costs CI a
  # minute, so the sanitizer pass skips them (ctest shows them Skipped).
  echo "== the sanitizer pass skips the browser tests (TG_SKIP_BROWSER_TESTS=1)"
  TG_SKIP_BROWSER_TESTS=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    run_suite build-asan -DTG_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
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
