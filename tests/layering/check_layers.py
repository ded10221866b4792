#!/usr/bin/env python3
"""The layering of src/ (docs/architecture.md), checked from the includes.

Every project include in src/<room>/ must name a room that <room> may use:
arrows point down only. A file's room is the first folder under src/, and a
quoted include "room/x.h" names the room of the header (an include without a
folder, as the stub uses for its own headers, stays in the same room).

Exits 1 and names every offending line when a lower layer includes a higher
one; prints the rooms it checked otherwise. The test of this test is
tests/layering/test_check_layers.py.
"""
import os
import re
import sys

# room -> rooms it may include (itself always allowed)
ALLOWED = {
    "core": set(),
    "platform": {"core"},
    "store": {"platform", "core"},
    "net": {"platform", "core"},
    "daemon": {"store", "net", "platform", "core"},
    "tools": {"daemon", "store", "net", "platform", "core"},
    # tollgate-sim: the real dispatcher in virtual time, above it like tools
    "sim": {"daemon", "store", "net", "platform", "core"},
    "cli": {"tools", "daemon", "store", "net", "platform", "core"},
    "stub": {"platform", "core"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SYSTEM = re.compile(r'^\s*#\s*include\s+<([^>]+)>')
# src/core is pure: the C library only, and no clock, sleep or I/O calls.
CORE_HEADERS = {"assert.h", "ctype.h", "errno.h", "inttypes.h", "limits.h", "math.h",
                "stdarg.h", "stdbool.h", "stddef.h", "stdint.h", "stdio.h", "stdlib.h",
                "string.h"}
CORE_CALLS = re.compile(r"\b(clock_gettime|gettimeofday|time|nanosleep|usleep|sleep|rand|"
                        r"fopen|open|read|write|socket|getenv)\s*\(")


def violations(src_root):
    found = []
    rooms_seen = set()
    for room in sorted(os.listdir(src_root)):
        path = os.path.join(src_root, room)
        if not os.path.isdir(path):
            continue
        rooms_seen.add(room)
        if room not in ALLOWED:
            found.append("%s: a room the layering does not know (add it to ALLOWED)" % path)
            continue
        for dirpath, _, files in os.walk(path):
            for name in sorted(files):
                if not name.endswith((".c", ".h")):
                    continue
                fpath = os.path.join(dirpath, name)
                with open(fpath, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        if room == "core":
                            sm = SYSTEM.match(line)
                            if sm and sm.group(1) not in CORE_HEADERS:
                                found.append("%s:%d: core includes <%s> (core is libc only)"
                                             % (fpath, lineno, sm.group(1)))
                            code = line.split("//")[0]
                            if not code.lstrip().startswith("*") and CORE_CALLS.search(code):
                                found.append("%s:%d: core calls %s (core reads no clock and "
                                             "does no I/O)" % (fpath, lineno,
                                                               CORE_CALLS.search(code).group(1)))
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        if "/" not in target:
                            continue  # a header of the same room
                        to = target.split("/", 1)[0]
                        if to == "..":
                            found.append("%s:%d: includes %s by a relative path"
                                         % (fpath, lineno, target))
                        elif to != room and to not in ALLOWED[room]:
                            found.append("%s:%d: %s includes %s (%s may use: %s)"
                                         % (fpath, lineno, room, target, room,
                                            ", ".join(sorted(ALLOWED[room])) or "nothing"))
    return found, rooms_seen


def main(argv):
    src_root = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
    found, rooms = violations(src_root)
    if found:
        print("layering: %d include(s) point up or sideways:" % len(found))
        for v in found:
            print("  " + v)
        return 1
    print("layering: ok (%s)" % ", ".join(sorted(rooms)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
