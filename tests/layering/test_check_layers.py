#!/usr/bin/env python3
"""The layering check fails when it should: a core file that includes the
store, a store file that includes the daemon, and the stub including the
daemon are each caught; a clean tree passes."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "check_layers.py")


def run(tree):
    return subprocess.run([sys.executable, CHECK, tree], capture_output=True, text=True)


def make(files):
    root = tempfile.mkdtemp(prefix="tg-layers-")
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    return root


def main():
    clean = {"core/a.c": '#include "core/a.h"\n', "store/s.c": '#include "core/a.h"\n',
             "daemon/d.c": '#include "store/s.h"\n#include "net/t.h"\n',
             "stub/x.c": '#include "x.h"\n#include "platform/clock.h"\n',
             "sim/w.c": '#include "daemon/dispatcher.h"\n#include "store/store.h"\n'}
    r = run(make(clean))
    assert r.returncode == 0, r.stdout + r.stderr
    for bad, what in [({"core/p.c": '#include "store/store.h"\n'}, "core includes store"),
                      ({"store/s.c": '#include "daemon/log.h"\n'}, "store includes daemon"),
                      ({"stub/s.c": '#include "daemon/config.h"\n'}, "stub includes daemon"),
                      ({"net/n.c": '#include "store/store.h"\n'}, "net includes store"),
                      ({"daemon/d.c": '#include "cli/cli.h"\n'}, "daemon includes cli"),
                      ({"daemon/d.c": '#include "sim/sim_env.h"\n'}, "daemon includes sim"),
                      ({"sim/w.c": '#include "tools/verify.h"\n'}, "sim includes tools"),
                      ({"core/c.c": '#include "../daemon/x.h"\n'}, "relative include"),
                      ({"core/c.c": '#include <curl/curl.h>\n'}, "core includes a library"),
                      ({"core/c.c": 'int f(void) { return clock_gettime(0, 0); }\n'},
                       "core reads a clock")]:
        tree = dict(clean)
        tree.update(bad)
        r = run(make(tree))
        assert r.returncode == 1, "not caught: %s\n%s" % (what, r.stdout)
    # and the real tree is clean
    r = run(os.path.join(HERE, "..", "..", "src"))
    assert r.returncode == 0, r.stdout
    print("ok:", r.stdout.strip())


if __name__ == "__main__":
    main()
