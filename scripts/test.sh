#!/usr/bin/env bash
# The whole test suite, as the README's second command and CI run it:
#   1. install missing Debian packages;
#   2. Release build (-Werror) and every test (unit, fuzz corpus replay, integration);
#   3. ASan+UBSan build: every unit test and fuzz corpus, and the integration
#      tests labelled sanitize;
#   4. format check (clang-format) and static analysis (cppcheck) of src/;
#   5. the .deb packages built, installed, run and removed (scripts/package-test.sh).
# Integration tests labelled parallel (tests/CMakeLists.txt: they judge
# behaviour only) run several at a time, in the same ctest -j as the unit
# tests and fuzz replays; those labelled serial judge timing and run
# after them, two at a time (one at a time under the sanitizers; a few
# alone: TG_IT_ALONE in tests/CMakeLists.txt). While they run
# (their processes mostly wait on a paced exit), the work that needs no quiet
# machine runs in the background at idle CPU and I/O priority (SCHED_IDLE,
# ionice idle: it gets only what the tests leave): the sanitizer build, the
# package build, the format check and cppcheck. TG_CI_BACKGROUND=0 runs it
# all in the foreground, one thing after another.
# Prints each phase's wall time at the end (also when a phase failed).
# Usage: scripts/test.sh [--quick]   (--quick skips the sanitizer build)
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
JOBS=$(nproc 2>/dev/null || echo 2)
# Behaviour-only integration tests at a time: they mostly wait on real
# processes, so one more than the cores.
IT_JOBS=${TG_IT_JOBS:-$((JOBS + 1))}
BACKGROUND=${TG_CI_BACKGROUND:-1}
LOGS=$(mktemp -d /tmp/tollgate-ci.XXXXXX)

# --- phase times -------------------------------------------------------------
PHASES=()     # "name|seconds|note"
CURRENT=""    # the foreground phase running now (named if it fails)
T_START=$SECONDS
phase() { # name, command...: runs the command in the foreground, timed
  local name=$1 t0=$SECONDS; shift
  CURRENT=$name
  echo "== $name"
  "$@"
  PHASES+=("$name|$((SECONDS - t0))|")
  CURRENT=""
}
print_phases() {
  local row name secs note
  echo "== phase times (wall clock)"
  printf '%-48s %8s  %s\n' phase seconds ""
  for row in "${PHASES[@]}"; do
    IFS='|' read -r name secs note <<<"$row"
    printf '%-48s %5d:%02d  %s\n' "$name" $((secs / 60)) $((secs % 60)) "$note"
  done
  [ -z "$CURRENT" ] || printf '%-48s %8s\n' "$CURRENT" FAILED
  secs=$((SECONDS - T_START))
  printf '%-48s %5d:%02d\n' total $((secs / 60)) $((secs % 60))
}

# --- background work (idle priority) ------------------------------------------
BG_PID=""
idle() { # puts this shell (and what it starts from now on) at idle CPU and I/O priority
  chrt --idle -p 0 "$BASHPID" >/dev/null 2>&1 || renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true
  ionice -c 3 -p "$BASHPID" >/dev/null 2>&1 || true
}
bg_step() { # name, command...: one step of the background chain, timed into $LOGS/bg.times
  local name=$1 t0=$SECONDS; shift
  echo "== $name" >>"$LOGS/bg.log"
  if "$@" >>"$LOGS/bg.log" 2>&1; then
    echo "$name|$((SECONDS - t0))|background" >>"$LOGS/bg.times"
  else
    echo "$name|$((SECONDS - t0))|background, FAILED" >>"$LOGS/bg.times"
    return 1
  fi
}
bg_start() { # the background chain, in order; stops at the first failure
  : >"$LOGS/bg.times"
  set -m   # its own process group, so that a failure elsewhere can stop all of it
  (
    set -e
    idle
    if [ "$QUICK" -eq 0 ]; then bg_step "asan build" build_dir build-asan sanitize; fi
    bg_step "package build" ./scripts/package-test.sh --build build-pkg
    bg_step "format" format_check
    bg_step "cppcheck" static_analysis
  ) &
  BG_PID=$!
  set +m
}
bg_wait() { # waits for the chain; shows its output; fails if a step failed
  local rc=0 row t0=$SECONDS
  CURRENT="background (asan build, package build, format, cppcheck)"
  echo "== waiting for the background work"
  wait "$BG_PID" || rc=$?
  BG_PID=""
  cat "$LOGS/bg.log"
  while IFS= read -r row; do PHASES+=("$row"); done <"$LOGS/bg.times"
  [ "$rc" -eq 0 ] || { echo "test.sh: a background step failed (above)" >&2; exit "$rc"; }
  PHASES+=("waiting for the background|$((SECONDS - t0))|")
  CURRENT=""
}

cleanup() {
  local rc=$?
  if [ -n "$BG_PID" ]; then
    kill -- "-$BG_PID" 2>/dev/null || true
    wait "$BG_PID" 2>/dev/null || true
    [ ! -f "$LOGS/bg.log" ] || { echo "== background work (stopped)"; cat "$LOGS/bg.log"; }
  fi
  print_phases
  mariadb_test_server_stop
  pg_test_server_stop
  rm -rf "$LOGS"
  exit "$rc"
}

# --- the steps -----------------------------------------------------------------
build_dir() { # build-dir, sanitize|all: configure and build (the sanitizer build with -DTG_SANITIZE=ON)
  local dir=$1 args=(-DCMAKE_BUILD_TYPE=Release)
  [ "$2" = sanitize ] && args=(-DTG_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo)
  cmake -S . -B "$dir" "${args[@]}" >/dev/null
  cmake --build "$dir" -j"$JOBS" 2>&1 | grep -v '^\[' || true
  cmake --build "$dir" -j"$JOBS" >/dev/null   # fail here if the build failed
}
side_by_side() { # build-dir, all|sanitize: unit tests, fuzz replays and the integration
  # tests labelled parallel, in one ctest -j (so that the long unit test,
  # sim.seeds, has the behaviour-only integration tests beside it, not an
  # idle core); in the sanitizer pass only those labelled sanitize. The unit
  # tests on the shared MariaDB (store_server, tests/CMakeLists.txt) first.
  local exclude='^(serial|store_server)$'
  [ "$2" = sanitize ] && exclude='^(serial|store_server|release_only)$'
  ctest --test-dir "$1" -L '^store_server$' -j"$JOBS" --output-on-failure
  ctest --test-dir "$1" -LE "$exclude" -j"$IT_JOBS" --output-on-failure
}
serial_tests() { # build-dir, all|sanitize: the integration tests labelled serial, two at a
  # time in the Release pass (those with RUN_SERIAL alone: tests/CMakeLists.txt,
  # TG_IT_ALONE), one at a time under the sanitizers (each process there costs
  # a few times the CPU)
  local sel=(-L integration -L serial) jobs=2
  [ "$2" = sanitize ] && { sel+=(-L sanitize); jobs=1; }
  ctest --test-dir "$1" "${sel[@]}" -j"$jobs" --output-on-failure
}
format_check() {
  local files
  mapfile -t files < <(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'tests/*.h' 'bench/*.c' 2>/dev/null || find src tests bench -name '*.[ch]')
  if [ ${#files[@]} -gt 0 ]; then
    clang-format --dry-run --Werror "${files[@]}"
  fi
}
static_analysis() {
  cppcheck --quiet --error-exitcode=1 --std=c11 --enable=warning,portability \
    --inline-suppr --suppress=missingIncludeSystem -I src src
}

# The sanitizer pass runs every unit test and fuzz corpus, and the
# integration tests labelled "sanitize" (tests/CMakeLists.txt): each real
# process and path once, not every variant the Release pass ran (the
# MariaDB and TLS repeats of the same scenarios, the browser, the demo).
sanitized() { # command...: with the sanitizers' options, without the browser
  TG_SKIP_BROWSER_TESTS=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1 "$@"
}

# A private MariaDB for the store tests that need one (started once the
# packages are there, removed on exit).
# shellcheck source=scripts/mariadb-test-server.sh
source ./scripts/mariadb-test-server.sh
# ... and a private PostgreSQL (TG_TEST_PG_URL), removed on exit as well.
# shellcheck source=scripts/pg-test-server.sh
source ./scripts/pg-test-server.sh
trap cleanup EXIT
phase install ./scripts/install-deps.sh
mariadb_test_server_start
pg_test_server_start

phase "build (Release)" build_dir build all
[ "$BACKGROUND" = 0 ] || bg_start
phase "unit + fuzz + integration parallel (Release)" side_by_side build all
phase "integration serial (Release)" serial_tests build all
if [ "$BACKGROUND" = 0 ]; then
  [ "$QUICK" -eq 1 ] || phase "asan build" build_dir build-asan sanitize
else
  bg_wait
fi
if [ "$QUICK" -eq 0 ]; then
  echo "== the sanitizer pass: unit, fuzz, and the integration tests labelled sanitize"
  phase "unit + fuzz + integration parallel (asan)" sanitized side_by_side build-asan sanitize
  phase "integration serial (asan)" sanitized serial_tests build-asan sanitize
fi
if [ "$BACKGROUND" = 0 ]; then
  phase format format_check
  phase cppcheck static_analysis
  phase "package build" ./scripts/package-test.sh --build build-pkg
fi
echo "== the Debian packages: built (BUILD_TESTING=OFF), installed, run as the package's user, removed"
phase "package test" ./scripts/package-test.sh --test build-pkg
echo "== all checks passed"
