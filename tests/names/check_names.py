#!/usr/bin/env python3
"""Every word of tollgate's four vocabularies is written once (issue 24).

The states, call kinds, outcome classes and manual reasons are the tables of
src/core/names.h (TG_STATES, TG_CALL_KINDS, TG_OUTCOME_CLASSES,
TG_MANUAL_REASONS). This test reads them and checks that:

- no other file under src/ writes one of the words as a C string literal
  ("pending") or as an SQL literal inside one ('pending'), outside the
  store's migrations (whose CHECK constraints and partial indexes are
  history: a migration, once shipped, never changes) -- except where the
  same spelling is a word of another vocabulary, each listed in OTHER below
  with why and how many times;
- the last CHECK constraint of the migrations of each backend lists exactly
  the table's states (operations.state) and kinds (calls.kind);
- openapi.yaml's enums of State, Call.kind, Call.class, the operation's
  reason and GET /v1/manual's reason are the tables (a class and a reason may
  also be null; "none" is null in the API);
- web/console/i18n.js has a translation of every word in every language it
  defines, and no word list of its own (the console takes the words from the
  session: src/daemon/ui.c).

Usage: check_names.py <source dir>. Exit 0 when all hold, 1 with one line per
problem.
"""

import fnmatch
import glob
import os
import re
import sys

TABLES = {
    "TG_STATES": "states",
    "TG_CALL_KINDS": "kinds",
    "TG_OUTCOME_CLASSES": "classes",
    "TG_MANUAL_REASONS": "reasons",
}

# The same spellings in other vocabularies: (files, word) -> (count, why) or
# (None, why, pattern). `files` is a glob relative to the source dir; a count
# is the number of literals the glob's files hold together (so that a new use
# of a vocabulary word there is found, and a file split in two keeps its
# allowance); a pattern allows the word on any line of those files where it
# is found (for forms that cannot be the vocabulary, such as an HTTP 404's
# error code).
OTHER = {
    # the provider's words (shared/PROVIDER.md), which classification reads
    ("src/core/classify.c", "succeeded"): (3, "the provider's body status in a default rule"),
    ("src/core/classify.c", "processing"): (2, "the provider's body status in a default rule"),
    ("src/core/classify.c", "not_found"): (1, "the provider's error code in a default rule"),
    ("src/core/classify.c", "query"): (1, "a rule's request word (post|query)"),
    ("src/core/provider_map.c", "succeeded"): (2, "the provider's status words"),
    ("src/core/provider_map.c", "processing"): (2, "the provider's status words"),
    ("src/daemon/provider_setup.c", "succeeded"): (1, "the provider's status words' defaults"),
    ("src/daemon/provider_setup.c", "processing"): (1, "the provider's status words' defaults"),
    ("src/daemon/config*.c", "succeeded"): (1, "the provider's status words' defaults"),
    ("src/daemon/config*.c", "processing"): (1, "the provider's status words' defaults"),
    ("src/sim/sim_provider.c", "succeeded"): (2, "the simulated provider's status"),
    ("src/sim/sim_provider.c", "processing"): (1, "the simulated provider's status"),
    ("src/sim/sim_provider.c", "not_found"): (1, "the simulated provider's error code"),
    # a resolution's outcome (succeeded|failed) in the API, the console, the
    # CLI and a settlement file: the provider's words too
    ("src/daemon/api_parse.c", "succeeded"): (2, "an outcome: succeeded|failed"),
    ("src/daemon/ui.c", "succeeded"): (1, "an outcome: succeeded|failed"),
    ("src/cli/cmd_manual.c", "succeeded"): (1, "an outcome: succeeded|failed"),
    ("src/daemon/settlement.c", "succeeded"): (1, "a settlement file's status"),
    ("src/tools/demo_resilience.c", "succeeded"): (1, "the demo's printed outcome"),
    # the config
    ("src/daemon/config*.c", "retry"): (None, "the [retry] section",
                                        r'"retry"\s*,|section\s*=\s*"retry"|PER_ACCOUNT\("retry"\)'),
    ("src/daemon/config*.c", "none"): (2, "provider.auth = none"),
    ("src/daemon/config*.c", "manual"): (1, "the [manual] section"),
    ("src/daemon/provider_setup.c", "none"): (1, "provider.auth = none"),
    # the API's and the console's own words
    ("src/daemon/*.c", "not_found"): (None, "the 404 error code", r'404, "not_found"'),
    ("src/daemon/api*.c", "retryable"): (2, "the error body's retryable member"),
    ("src/daemon/api_parse.c", "deadline"): (4, "the refund's deadline member"),
    ("src/daemon/api_auth.c", "invalid"): (1, "an out-of-range auth failure's name"),
    ("src/daemon/api.c", "unknown"): (1, "readiness: a reason not known"),
    ("src/daemon/api*.c", "none"): (2, "a role: none"),
    ("src/daemon/ui_data.c", "none"): (1, "a role: none"),
    ("src/daemon/service.c", "none"): (2, "a role: none"),
    ("src/daemon/ui.c", "none"): (4, "CSP 'none', Sec-Fetch-Site: none"),
    ("src/daemon/ui.c", "manual"): (1, "the console's route manual"),
    ("src/daemon/ui_data.c", "unknown"): (1, "admission: why unknown"),
    ("src/daemon/exit_stats.c", "query"): (1, "a wait's reason (backoff, query, hold)"),
    ("src/daemon/exit_stats.c", "invalid"): (1, "an out-of-range wait reason's name"),
    # the in-flight count (calls open), a figure, not the state
    ("src/daemon/exit.c", "in_flight"): (1, "the in-flight figure"),
    ("src/daemon/ui_data.c", "in_flight"): (2, "the in-flight figure"),
    ("src/daemon/timeline_data.c", "in_flight"): (1, "the in-flight figure"),
    ("src/daemon/render.c", "in_flight"): (1, "a call's in-flight count at its start"),
    ("src/daemon/api_metrics.c", "in_flight"): (2, "the in-flight figure"),
    ("src/tools/runlog.c", "in_flight"): (1, "a run log's in-flight figure"),
    ("src/tools/verify_timing.c", "in_flight"): (1, "a finding's name"),
    # the outbox job's figure (rows taken, rows invalid)
    ("src/daemon/exit.c", "invalid"): (1, "the outbox job's figure"),
    # the transition table's events and out-of-range names (core)
    ("src/core/policy.c", "deadline"): (1, "the event deadline"),
    ("src/core/policy.c", "key_retention"): (1, "the event key_retention"),
    ("src/core/policy.c", "invalid"): (1, "an out-of-range event's name"),
    ("src/core/names.c", "invalid"): (2, "an out-of-range value's name"),
    ("src/core/backoff.c", "unknown"): (1, "an out-of-range jitter mode's name"),
    ("src/core/backoff.c", "none"): (1, "the jitter mode none"),
    ("src/tools/cmd_jitter.c", "none"): (3, "the jitter mode none; no cap"),
    ("src/tools/capacity.c", "unknown"): (1, "an out-of-range value's name"),
    ("src/store/store.c", "none"): (1, "the backend of no store"),
    ("src/store/store_exit.c", "invalid"): (1, "a refused outbox row's fallback message"),
    # commands, invariants and log lines
    ("src/cli/cmd_manual.c", "manual"): (1, "the command manual"),
    ("src/cli/main.c", "manual"): (1, "the command manual"),
    ("src/sim/sim_check.c", "in_flight"): (1, "the in-flight invariant's name"),
    ("src/sim/sim_check.c", "deadline"): (2, "the deadline invariant's name"),
    ("src/sim/sim_world.c", "query"): (1, "a log line's request word (POST|query)"),
    ("src/sim/sim_check.c", "query"): (1, "a log line's request word (POST|query)"),
}

# The provider stand-in speaks the provider's words (shared/PROVIDER.md:
# "succeeded", "processing", "not_found", ...), never tollgate's: it depends
# on nothing of the daemon.
SKIP = os.path.join("src", "stub") + os.sep


def strip_comments(text):
    """C text with its comments blanked (newlines kept), strings kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def read_tables(src):
    path = os.path.join(src, "src", "core", "names.h")
    text = strip_comments(open(path, encoding="utf-8").read()).replace("\\\n", " ")
    tables = {}
    for macro, key in TABLES.items():
        m = re.search(r"#define\s+%s\(X\)(.*)" % macro, text)
        if not m:
            raise SystemExit("%s: no %s(X)" % (path, macro))
        tables[key] = re.findall(r'X\(\s*\w+\s*,\s*"([a-z_]+)"\s*\)', m.group(1))
    return tables


def migrations_span(text):
    """The [start, end) of the migrations[] initializer, or None."""
    m = re.search(r"migrations\[\]\s*=\s*\{", text)
    if not m:
        return None
    depth, i = 0, m.end() - 1
    while i < len(text):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return (m.start(), i + 1)
        elif text[i] == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j
        i += 1
    return None


def allowance(rel, w, line):
    """The OTHER key that allows word w on this line of rel, or None: an
    allowance by context (its pattern found on the line) first, then the
    file's own, then a glob's."""
    keys = [k for k in OTHER if k[1] == w and fnmatch.fnmatch(rel, k[0])]
    for k in keys:
        if len(OTHER[k]) > 2 and re.search(OTHER[k][2], line):
            return k
    counted = sorted((k for k in keys if len(OTHER[k]) == 2), key=lambda k: "*" in k[0])
    return counted[0] if counted else None


def check_once(src, tables, problems):
    words = set(w for ws in tables.values() for w in ws)
    used = {}  # OTHER key -> n
    for path in sorted(glob.glob(os.path.join(src, "src", "**", "*.[ch]"), recursive=True)):
        rel = os.path.relpath(path, src)
        if rel == os.path.join("src", "core", "names.h") or rel.startswith(SKIP):
            continue
        text = strip_comments(open(path, encoding="utf-8").read())
        lines = text.split("\n")
        span = migrations_span(text)
        for m in STRING.finditer(text):
            if span and span[0] <= m.start() < span[1]:
                continue
            body = m.group(1)
            found = [body] if body in words else []
            found += [w for w in re.findall(r"'([a-z_]+)'", body) if w in words]
            for w in found:
                n = text.count("\n", 0, m.start())
                key = allowance(rel, w, lines[n])
                if key is None:
                    problems.append("%s:%d: %r is a word of core/names.h: take it from there "
                                    "(op_state_name(), tg_call_kind_name(), tg_class_name(), "
                                    "manual_reason_name())" % (rel, n + 1, w))
                else:
                    used[key] = used.get(key, 0) + 1
    for key, n in sorted(used.items()):
        if len(OTHER[key]) == 2 and n > OTHER[key][0]:
            problems.append("%s: %r written %d times, %d allowed (%s): a new use of the "
                            "vocabulary word? take it from core/names.h"
                            % (key[0], key[1], n, OTHER[key][0], OTHER[key][1]))
    for key, v in sorted(OTHER.items()):
        if len(v) == 2 and used.get(key, 0) < v[0]:
            problems.append("%s: %r allowed %d times (%s) but written %d: lower the count "
                            "in tests/names/check_names.py" % (key[0], key[1], v[0], v[1],
                                                                used.get(key, 0)))
        if len(v) > 2 and not used.get(key):
            problems.append("%s: %r allowed (%s) but not written: drop the allowance in "
                            "tests/names/check_names.py" % (key[0], key[1], v[1]))


def check_migrations(src, tables, problems):
    for rel in ("src/store/store_sqlite_schema.c", "src/store/store_mysql.c", "src/store/store_pg.c"):
        text = strip_comments(open(os.path.join(src, rel), encoding="utf-8").read())
        span = migrations_span(text)
        if not span:
            problems.append("%s: no migrations[] found" % rel)
            continue
        # the SQL of the migrations, in order: adjacent literals joined
        sql = "".join(m.group(1) for m in STRING.finditer(text[span[0]:span[1]]))
        for column, key in (("state", "states"), ("kind", "kinds")):
            checks = re.findall(r"CHECK\s*\(\s*%s\s+IN\s*\(([^)]*)\)" % column, sql)
            if not checks:
                problems.append("%s: no CHECK (%s IN (...)) in the migrations" % (rel, column))
                continue
            last = re.findall(r"'([a-z_]+)'", checks[-1])
            if last != tables[key]:
                problems.append("%s: the migrations' last CHECK of %s lists %s; core/names.h "
                                "has %s" % (rel, column, last, tables[key]))


def yaml_enum(text, anchor_re, what, problems):
    """The enum list that follows the first match of anchor_re."""
    m = re.search(anchor_re + r"[\s\S]*?enum:\s*\[([^\]]*)\]", text)
    if not m:
        problems.append("openapi.yaml: no enum for %s" % what)
        return None
    return [w.strip() for w in m.group(1).replace("\n", " ").split(",") if w.strip()]


def check_openapi(src, tables, problems):
    text = open(os.path.join(src, "openapi.yaml"), encoding="utf-8").read()
    reasons = [w for w in tables["reasons"] if w != "none"]
    want = [
        (r"\n    State:\n", "State", tables["states"]),
        (r"\n    Call:\n[\s\S]*?\n        kind:", "Call.kind", tables["kinds"]),
        (r"\n    Call:\n[\s\S]*?\n        class:", "Call.class", tables["classes"] + ["null"]),
        (r"\n    Operation:\n[\s\S]*?\n        reason:\n", "the operation's reason",
         reasons + ["null"]),
        (r"- name: reason\n\s+in: query", "GET /v1/manual's reason", reasons),
    ]
    for anchor, what, words in want:
        got = yaml_enum(text, anchor, what, problems)
        if got is not None and got != words:
            problems.append("openapi.yaml: %s is %s; core/names.h has %s" % (what, got, words))


def check_console(src, tables, problems):
    path = os.path.join(src, "web", "console", "i18n.js")
    text = open(path, encoding="utf-8").read()
    prefix = {"states": "state.", "kinds": "kind.", "classes": "class.", "reasons": "reason."}
    # the languages: the dict's top-level blocks ("en: {", "'zh-TW': {")
    blocks = re.findall(r"\n    '?([A-Za-z-]+)'?: \{\n([\s\S]*?)\n    \}", text)
    if len(blocks) < 2:
        problems.append("web/console/i18n.js: fewer than two languages found")
    for lang, body in blocks:
        keys = set(re.findall(r"\n\s*'([^']+)':", "\n" + body))
        for key, words in tables.items():
            for w in words:
                if key == "reasons" and w == "none":
                    continue
                if prefix[key] + w not in keys:
                    problems.append("web/console/i18n.js: %s has no translation of %s%s"
                                    % (lang, prefix[key], w))
    for listname in ("TG.states =", "TG.reasons =", "TG.kinds =", "TG.classes ="):
        if listname in text:
            problems.append("web/console/i18n.js: %s a list of words of its own (the console "
                            "takes them from the session)" % listname)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    src = sys.argv[1]
    tables = read_tables(src)
    problems = []
    for key, words in tables.items():
        if not words or len(set(words)) != len(words):
            problems.append("src/core/names.h: %s is empty or repeats a word: %s" % (key, words))
    check_once(src, tables, problems)
    check_migrations(src, tables, problems)
    check_openapi(src, tables, problems)
    check_console(src, tables, problems)
    for p in problems:
        print(p)
    if not problems:
        print("names: %s words, each written once; migrations, openapi.yaml and the console "
              "agree" % sum(len(w) for w in tables.values()))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
