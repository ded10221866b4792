"""The configuration reference is generated, never edited: docs/config.md must
be exactly what `tollgate config defaults --format markdown` prints from the
key table in src/daemon/config_keys.c (each default read from config_defaults()).
Also: the command's other forms and errors, and that every relative link in
README.md and docs/*.md names a file that exists.
"""

import difflib
import glob
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402

REGENERATE = "build/tollgate config defaults --format markdown > docs/config.md"

# Links that may point at a page not written yet (none now: every page a
# link names exists).
PENDING = set()


def run(*args):
    p = subprocess.run([tgtest.binary("tollgate")] + list(args), capture_output=True,
                       text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


class ConfigDocTest(unittest.TestCase):
    def test_config_md_is_generated(self):
        rc, out, err = run("config", "defaults", "--format", "markdown")
        self.assertEqual(rc, 0, err)
        path = os.path.join(tgtest.source_dir(), "docs", "config.md")
        with open(path, encoding="utf-8") as f:
            have = f.read()
        if have != out:
            diff = "".join(list(difflib.unified_diff(
                have.splitlines(True), out.splitlines(True),
                "docs/config.md (checked in)", "tollgate config defaults --format markdown"))[:80])
            self.fail("docs/config.md differs from the key table; regenerate it with\n    %s\n%s"
                      % (REGENERATE, diff))

    def test_ini_form(self):
        rc, out, err = run("config", "defaults")
        self.assertEqual(rc, 0, err)
        rc2, out2, _ = run("config", "defaults", "--format=ini")
        self.assertEqual((rc2, out2), (0, out))
        self.assertIn("\n[exit]\n", out)
        self.assertIn("\nstarts_per_second = 5\n", out)
        self.assertIn("\n# token_file =\n", out)  # no default: commented out

    def test_defaults_quoted_elsewhere_agree(self):
        """The defaults live in the key table only: what README.md and the
        packaged example config say of them must be what `config defaults`
        prints (a changed default fails here until both are mended)."""
        rc, out, err = run("config", "defaults")
        self.assertEqual(rc, 0, err)
        d, section = {}, None
        for line in out.splitlines():
            m = re.match(r"^\[([a-z_.]+)\]$", line)
            if m:
                section = m.group(1)
            m = re.match(r"^([a-z_]+) = (\S+)$", line)
            if m and section:
                d[section + "." + m.group(1)] = m.group(2)
        rate = float(d["exit.starts_per_second"])
        readme = open(os.path.join(tgtest.source_dir(), "README.md"), encoding="utf-8").read()
        for phrase in ("default %g/s" % rate,
                       "at least %g ms between" % (1000 / rate),
                       "in flight (default %s)" % d["exit.max_in_flight"],
                       "at most %s times" % d["retry.max_attempts"],
                       "cut to %s s" % d["retry.retry_after_cap_s"],
                       "finish in %g minutes" % (int(d["retry.deadline_s"]) / 60),
                       "at most %s)" % d["retry.max_attempts"]):
            self.assertIn(phrase, " ".join(readme.split()), "README.md")
        # the packaged example: the exit's quota and the call's timeout are
        # shown at their defaults (the rest of it is this install's choices)
        ini, section = {}, None
        for line in open(os.path.join(tgtest.source_dir(), "packaging", "tollgate.ini"), encoding="utf-8"):
            m = re.match(r"^\[([a-z_.]+)\]", line)
            if m:
                section = m.group(1)
            m = re.match(r"^([a-z_]+) = (\S+)", line)
            if m:
                ini[section + "." + m.group(1)] = m.group(2)
        for key in ("exit.starts_per_second", "exit.max_in_flight", "provider.timeout_ms"):
            self.assertEqual(ini[key], d[key], "packaging/tollgate.ini " + key)

    def test_several_accounts_checked(self):
        # config check accepts several accounts (test_accounts.py serves
        # them) and names an account's key with its account.
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            ini = os.path.join(d, "t.ini")
            with open(ini, "w") as f:
                f.write("[api]\nlisten = 127.0.0.1:%d\n[account.eu]\nexit.starts_per_second = 20\n"
                        "[account.us]\n" % tgtest.free_port())
            rc, out, err = run("config", "check", "--config", ini)
            self.assertEqual(rc, 0, out + err)
            with open(ini, "w") as f:
                f.write("[account.eu]\nexit.max_in_flight = 2\nexit.shares = 3\n")
            rc, out, err = run("config", "check", "--config", ini)
            self.assertEqual(rc, 1)
            self.assertIn(":3: account.eu.exit.shares: must be <= exit.max_in_flight (2)",
                          out + err)

    def test_usage_errors(self):
        for args, words in ((["config"], "defaults"),
                            (["config", "nonsense"], "nonsense"),
                            (["config", "defaults", "--format", "yaml"], "yaml"),
                            (["config", "defaults", "--format"], "--format"),
                            (["config", "defaults", "--bogus"], "--bogus")):
            rc, out, err = run(*args)
            self.assertEqual(rc, 2, args)
            self.assertEqual(out, "", args)
            self.assertIn(words, err, args)
        rc, out, _ = run("config", "defaults", "--help")
        self.assertEqual(rc, 0)
        self.assertIn("--format ini", out)
        rc, out, _ = run("--help")
        self.assertIn("config defaults", out)

    def test_links_resolve(self):
        src = tgtest.source_dir()
        pages = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
        broken = []
        for page in pages:
            with open(page, encoding="utf-8") as f:
                text = f.read()
            for target in re.findall(r"\]\(([^)\s]+)\)", text):
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue  # a URL or an anchor on the same page
                path = os.path.normpath(os.path.join(os.path.dirname(page), target.split("#")[0]))
                if os.path.relpath(path, src) in PENDING:
                    continue
                if not os.path.exists(path):
                    broken.append("%s -> %s" % (os.path.relpath(page, src), target))
        self.assertEqual(broken, [], "links to files that do not exist")


if __name__ == "__main__":
    tgtest.main_unittest()
