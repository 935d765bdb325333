#!/usr/bin/env python3
"""End-to-end tests of the `cuckoo` command-line tool (cli/; manual: docs/cuckoo.1).

Usage: test_cli.py CUCKOO LIB_QUERY GROUP

  CUCKOO     the tool (build/cuckoo)
  LIB_QUERY  tests/cli/lib_query.c, built as cli_lib_query: the library's own answers
             (cf_load, then cf_contains or cf_get_stats) for the same files
  GROUP      basic     every subcommand and option, keys from arguments, stdin and -0,
                       odd bytes in keys, info --json against the library, exit 0 and 3
             errors    exit 1 (usage) and 2 (missing, corrupt, truncated, directory,
                       unwritable): one line on stderr naming the file, file unchanged
             kill9     `cuckoo add` killed with SIGKILL at random moments, 200 times: the
                       file is always the old one or a new one holding the whole batch,
                       and the next save removes the temporary files killed runs left
             writers   two commands changing one file at once lose nothing (a lock;
                       --no-wait), updates through a symbolic link keep the link, the
                       owner and the mode, create --force never replaces a special file
             build_1m  `cuckoo build` of 1M keys: no false negatives, false positives
                       within bounds, and the same answers as the library

Environment: CF_TEST_SEED (an integer) fixes the randomness (printed on failure);
CF_TEST_SCALE (a positive number, default 1) scales the number of kills (200; 5 gives the
long form; half in a sanitizer build, where CMake sets CF_TEST_SANITIZED) and
CF_KILL_ITERATIONS sets it outright. The tests use Python's standard
library only, work in a temporary directory and make no timing assertions.
"""
import json
import math
import os
import random
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rb_reference import murmur64a  # noqa: E402

DEFAULT_SEED = 20240611
NL = b"\n"
CALL_TIMEOUT = 600  # seconds for one run of the tool (the ASan build is slower)


# ---------------------------------------------------------------------------------------
# Running the tool and recording failures
# ---------------------------------------------------------------------------------------

def short(data, limit=600):
    """A readable excerpt of bytes for a failure message."""
    if data is None:
        return "None"
    text = repr(data[:limit])
    return text + (f" ... ({len(data)} bytes)" if len(data) > limit else "")


class Result:
    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err

    def describe(self):
        args = " ".join(a.decode("utf-8", "backslashreplace") if isinstance(a, bytes) else a
                        for a in self.argv[1:])
        prog = os.path.basename(self.argv[0])
        return (f"    $ {prog} {args[:400]}\n    exit status {self.rc}\n"
                f"    stdout: {short(self.out)}\n    stderr: {short(self.err)}")


class Tester:
    def __init__(self, tool, lib, group, seed, workdir):
        self.tool, self.lib, self.group, self.seed, self.dir = tool, lib, group, seed, workdir
        self.rng = random.Random(f"{seed}/{group}")
        self.failures = []
        self.checks = 0

    # -- recording --------------------------------------------------------------------
    def check(self, cond, msg, res=None):
        self.checks += 1
        if not cond:
            text = msg + ("\n" + res.describe() if res is not None else "")
            self.failures.append(text)
            print("FAIL: " + text, flush=True)
        return bool(cond)

    def section(self, name):
        print(f"-- {name}", flush=True)

    # -- paths ------------------------------------------------------------------------
    def path(self, name):
        return os.path.join(self.dir, name)

    # -- running ----------------------------------------------------------------------
    def run(self, args, input=None, stdin=None, tool=None, **kw):
        """Runs the tool (or `tool`) with args (str or bytes). stdin is /dev/null unless
        `input` (bytes, through a pipe) or `stdin` (an open file) is given."""
        argv = [tool or self.tool] + [a if isinstance(a, bytes) else str(a) for a in args]
        if input is None and stdin is None:
            stdin = subprocess.DEVNULL
        p = subprocess.run(argv, input=input, stdin=stdin, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, cwd=self.dir, timeout=CALL_TIMEOUT, **kw)
        return Result(argv, p.returncode, p.stdout, p.stderr)

    def run_file_stdin(self, args, stdin_path, **kw):
        with open(stdin_path, "rb") as f:
            return self.run(args, stdin=f, **kw)

    def lib_run(self, args, input=None, stdin=None):
        return self.run(args, input=input, stdin=stdin, tool=self.lib)

    # -- expectations -----------------------------------------------------------------
    def ok(self, res, what, quiet=False):
        good = self.check(res.rc == 0, f"{what}: expected exit status 0", res)
        if good and quiet:
            good = self.check(res.err == b"", f"{what}: --quiet, yet stderr is not empty", res)
        return good

    def one_line(self, err):
        return err.endswith(b"\n") and err.count(b"\n") == 1

    def file_error(self, res, path, what, rc=2):
        """Exit status rc, nothing on stdout, exactly one line on stderr naming path."""
        p = path.encode() if isinstance(path, str) else path
        problems = []
        if res.rc != rc:
            problems.append(f"exit status {res.rc}, not {rc}")
        if res.out != b"":
            problems.append("output on stdout")
        if not self.one_line(res.err):
            problems.append(f"{res.err.count(NL)} lines on stderr, not 1")
        if p not in res.err:
            problems.append(f"stderr does not name {path}")
        return self.check(not problems, f"{what}: " + "; ".join(problems), res)

    def usage_error(self, res, what):
        good = self.check(res.rc == 1, f"{what}: expected exit status 1 (usage)", res)
        good &= self.check(res.out == b"", f"{what}: expected nothing on stdout", res)
        good &= self.check(res.err.startswith(b"cuckoo") and res.err.count(b"\n") == 1
                           and res.err.endswith(b"\n"),
                           f"{what}: expected a one-line error message on stderr", res)
        return good

    # -- the filter's figures ---------------------------------------------------------
    def info(self, path):
        res = self.run(["info", path, "--json"])
        if not self.check(res.rc == 0, f"info --json {path}: exit status", res):
            return None
        try:
            doc = json.loads(res.out)
        except ValueError as e:
            self.check(False, f"info --json output is not JSON: {e}", res)
            return None
        self.check(isinstance(doc, dict), "info --json: not a JSON object", res)
        return doc if isinstance(doc, dict) else None

    def lib_stats(self, path):
        res = self.lib_run(["stats", path])
        if not self.check(res.rc == 0, f"library stats of {path}", res):
            return None
        return json.loads(res.out)

    def items(self, path):
        doc = self.info(path)
        return doc.get("items") if doc else None

    # -- queries ----------------------------------------------------------------------
    def parse_answers(self, res, keys, what, term=b"\n"):
        """Checks `KEY<TAB>yes|no` records, one per key in order, each ended by term;
        returns [bool] or None. Parsed key by key, so keys may hold tabs and newlines."""
        if not self.check(res.rc == 0, f"{what}: exit status", res):
            return None
        out, pos, answers = res.out, 0, []
        for key in keys:
            rec = key + b"\t"
            if not self.check(out.startswith(rec, pos),
                              f"{what}: expected a record for key {key[:100]!r} at byte {pos}:"
                              f" {out[pos:pos + 120]!r}", res):
                return None
            pos += len(rec)
            for word, answer in ((b"yes", True), (b"no", False)):
                if out.startswith(word + term, pos):
                    answers.append(answer)
                    pos += len(word) + len(term)
                    break
            else:
                self.check(False, f"{what}: key {key[:100]!r} is followed by "
                           f"{out[pos:pos + 20]!r}, not yes or no and {term!r}", res)
                return None
        if not self.check(pos == len(out), f"{what}: more records than keys", res):
            return None
        return answers

    def query_args(self, path, keys, what):
        return self.parse_answers(self.run(["query", path] + list(keys)), keys, what)

    def query_stdin(self, path, keys, what, nul=False):
        sep = b"\0" if nul else b"\n"
        args = ["query", path] + (["-0"] if nul else [])
        res = self.run(args, input=records(keys, nul))
        return self.parse_answers(res, keys, what, term=sep)

    def lib_answers(self, path, keys, nul=False):
        res = self.lib_run(["query0" if nul else "query", path], input=records(keys, nul))
        if not self.check(res.rc == 0 and len(res.out) == len(keys) + 1,
                          "library query helper", res):
            return None
        return [c == ord("1") for c in res.out[:-1]]

    def all_present(self, path, keys_path, what, nul=False):
        """`query --absent` over a key file prints nothing: every key is there."""
        res = self.run_file_stdin(["query", path, "--absent"] + (["-0"] if nul else []),
                                  keys_path)
        ok = self.check(res.rc == 0, f"{what}: query --absent exit status", res)
        return ok and self.check(res.out == b"", f"{what}: keys missing (false negatives)", res)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def records(keys, nul=False):
    """Keys as NUL-terminated records, or as lines: a key that ends with "\r" takes "\r\n"
    (only one "\r\n" is stripped), any other "\n"."""
    if nul:
        return b"".join(k + b"\0" for k in keys)
    return b"".join(k + (b"\r\n" if k.endswith(b"\r") else b"\n") for k in keys)


def lines(keys, ends=None):
    """Keys as lines; ends[i % len(ends)] terminates key i (default "\\n")."""
    ends = ends or [b"\n"]
    return b"".join(k + ends[i % len(ends)] for i, k in enumerate(keys))


def full_load_fpr(f, b):
    """The tool's full-load bound 1 - (1 - p)^(2b), p = (2^f + 2) / 2^(2f)."""
    p = (2.0 ** f + 2.0) / 2.0 ** (2 * f)
    return -math.expm1(2.0 * b * math.log1p(-p))


def expected_bits(fpr, b):
    """Smallest f in 4..32 whose bound meets fpr, and whether fpr sits close to a bound
    (where rounding could tip the choice either way: such cases are not tested)."""
    for f in range(4, 33):
        bound = full_load_fpr(f, b)
        if bound <= fpr:
            close = abs(bound - fpr) <= 1e-6 * fpr or (
                f > 4 and abs(full_load_fpr(f - 1, b) - fpr) <= 1e-6 * fpr)
            return f, close
    return None, False


def header_seed(data):
    return int.from_bytes(data[24:32], "little")


def tmp_leftovers(directory, name):
    return sorted(e for e in os.listdir(directory) if e.startswith(name + ".tmp"))


# Keys with every kind of awkward byte. LINE_KEYS contain no "\n" and no NUL; ARG_KEYS are
# those that can be given as arguments whatever the option parser does with a leading '-'.
LINE_KEYS = [
    b"plain", b"with space", b"two  spaces", b"tab\tinside", b"\ttab-first", b"tab-last\t",
    b"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x90\xa6 \xe4\xb8\xad\xe6\x96\x87",
    b"high \xff\xfe\x80\x81 bytes", b"\xff", b"\x01\x02\x7f control", b"mid\rcr",
    b"\rcr-first", b" leading space", b"trailing space ", b"-dash-first", b"--", b"-",
    b"quote\"'`", b"back\\slash", b"x" * 3000, b"#comment-like", b"semi;colon|pipe&amp",
    b"a=b", b"*glob?[x]", b"$HOME", b"1", b"0", b"",  # the empty key: an empty line
]
ARG_KEYS = [k for k in LINE_KEYS if not k.startswith(b"-")]
NUL_KEYS = LINE_KEYS + [
    b"emb\nnewline", b"ends-with-newline\n", b"\n", b"ends-crlf\r\n", b"multi\nline\n\nkey\n",
    b"cr-last\r", b"\r\n\r\n",
]
# Never added anywhere; with 32-bit fingerprints a false positive among them is a
# one-in-a-hundred-million event, so "no" is the answer.
PROBES = [b"ends-with-newline", b"ends-crlf", b"ends-crlf\r", b"mid", b"cr", b"plain\r",
          b"plain ", b"Plain", b"emb", b"newline", b"cr-last", b"caf\xc3\xa9", b"x" * 2999]


# ---------------------------------------------------------------------------------------
# basic: every subcommand, exit 0 and 3
# ---------------------------------------------------------------------------------------

def test_help_version(t):
    t.section("--help and --version")
    for args in (["--help"], ["-h"]) + tuple([s, "--help"] for s in
                                             ("create", "build", "add", "query", "delete",
                                              "count", "info", "verify")):
        res = t.run(args)
        t.check(res.rc == 0, f"{' '.join(args)}: exit status", res)
        t.check(b"usage" in res.out.lower(), f"{' '.join(args)}: no usage on stdout", res)
        t.check(res.err == b"", f"{' '.join(args)}: stderr not empty", res)
    res = t.run(["--version"])
    t.check(res.rc == 0 and re.search(rb"\d+\.\d+\.\d+", res.out) is not None
            and res.out.count(b"\n") == 1, "--version: one line with a version number", res)


def test_create(t):
    t.section("create: parameters, --fpr, seeds, --force")
    a = t.path("create-a.cf")
    res = t.run(["create", a, "--capacity", "1000", "--seed", "42"])
    t.ok(res, "create --capacity 1000 --seed 42")
    t.check(os.path.isfile(a), "create did not make the file")
    doc = t.info(a)
    if doc:
        for key, want in (("capacity", 1000), ("fingerprint_bits", 12), ("bucket_size", 4),
                          ("max_kicks", 500), ("expansion", 0), ("items", 0),
                          ("sub_filters", 1)):
            t.check(doc.get(key) == want, f"create defaults: info {key} is {doc.get(key)!r},"
                    f" want {want!r}")
        t.check(str(doc.get("seed")) in ("42", "0x000000000000002a", "0x2a"),
                f"info seed is {doc.get('seed')!r}, want 42")
    t.check(header_seed(read(a)) == 42, "--seed 42 is not the seed in the file's header")
    res = t.run(["verify", a])
    t.ok(res, "verify of a new file")

    # Same --seed: the same bytes. No --seed: random seeds, so different files.
    b = t.path("create-b.cf")
    t.ok(t.run(["create", b, "--capacity", "1000", "--seed", "42", "--quiet"]),
         "create --quiet", quiet=True)
    t.check(read(a) == read(b), "two creates with --seed 42 differ")
    r1, r2 = t.path("random-1.cf"), t.path("random-2.cf")
    t.ok(t.run(["create", r1, "--capacity", "1000", "-q"]), "create without --seed")
    t.ok(t.run(["create", r2, "--capacity", "1000", "-q"]), "create without --seed")
    if os.path.exists(r1) and os.path.exists(r2):
        t.check(header_seed(read(r1)) != header_seed(read(r2)),
                "two creates without --seed have the same seed")

    # An existing file is kept without --force, replaced with it.
    before = read(a)
    res = t.run(["create", a, "--capacity", "500", "--seed", "7"])
    t.file_error(res, a, "create over an existing file without --force")
    t.check(read(a) == before, "create without --force changed the existing file")
    res = t.run(["create", a, "--capacity", "500", "--seed", "7", "--force", "--quiet"])
    t.ok(res, "create --force", quiet=True)
    doc = t.info(a)
    t.check(doc and doc.get("capacity") == 500, "create --force did not replace the file")

    # Every shape option lands in the file.
    c = t.path("create-c.cf")
    res = t.run(["create", c, "--capacity", "5000", "--fingerprint-bits", "20",
                 "--bucket-size", "8", "--max-kicks", "100", "--expansion", "2",
                 "--seed", "0x10", "--quiet"])
    t.ok(res, "create with every option", quiet=True)
    doc = t.info(c)
    if doc:
        for key, want in (("capacity", 5000), ("fingerprint_bits", 20), ("bucket_size", 8),
                          ("max_kicks", 100), ("expansion", 2)):
            t.check(doc.get(key) == want, f"create options: info {key} is {doc.get(key)!r},"
                    f" want {want!r}")

    # --fpr picks the smallest width whose full-load bound meets it.
    f = t.path("fpr.cf")
    tested = 0
    for b_size in (2, 4, 8):
        for fpr in (0.3, 0.05, 0.01, 0.003, 1e-3, 2e-4, 1e-5, 3e-7, 1e-8):
            want, close = expected_bits(fpr, b_size)
            if want is None or close:
                continue
            res = t.run(["create", f, "--capacity", "2000", "--fpr", repr(fpr),
                         "--bucket-size", str(b_size), "--seed", "1", "--force", "--quiet"])
            if t.ok(res, f"create --fpr {fpr} --bucket-size {b_size}", quiet=True):
                doc = t.info(f)
                got = doc.get("fingerprint_bits") if doc else None
                t.check(got == want, f"--fpr {fpr} with {b_size}-slot buckets gave {got}-bit "
                        f"fingerprints; the smallest meeting the bound is {want}")
                tested += 1
    t.check(tested >= 20, f"only {tested} --fpr cases tested")
    res = t.run(["create", t.path("no.cf"), "--capacity", "10", "--fpr", "0.01",
                 "--fingerprint-bits", "8"])
    t.usage_error(res, "create --fpr with --fingerprint-bits")
    t.check(not os.path.exists(t.path("no.cf")), "a usage error created the file")

    # Growth: wider fingerprints by default, within --fpr-bound; --same-width keeps them.
    keys = lines([b"grow-%d" % i for i in range(40000)])
    first = full_load_fpr(12, 4)
    for opts, name in (([], "default"), (["--fpr-bound", "0.003"], "--fpr-bound 0.003"),
                       (["--same-width"], "--same-width")):
        g = t.path("widen.cf")
        res = t.run(["create", g, "--capacity", "1000", "--expansion", "2", "--seed", "5",
                     "--force", "--quiet"] + opts)
        if not t.ok(res, f"create growing, {name}", quiet=True):
            continue
        t.ok(t.run(["add", g, "-q"], input=keys), f"add to a growing filter, {name}",
             quiet=True)
        doc = t.info(g) or {}
        subs, newest = doc.get("sub_filters", 0), doc.get("newest_fingerprint_bits")
        bound, fpr = doc.get("fpr_bound", 1.0), doc.get("fpr", 1.0)
        t.check(subs >= 5, f"{name}: {subs} sub-filters after 40x the capacity")
        t.check(doc.get("same_width") == (name == "--same-width"),
                f"{name}: info same_width is {doc.get('same_width')!r}")
        if name == "--same-width":
            t.check(newest == 12 and fpr > 2 * first,
                    f"{name}: newest width {newest}, rate {fpr} (want 12 bits, above {2 * first})")
        else:
            want = 0.003 if opts else 2 * first
            t.check(newest is not None and newest > 12 and fpr <= bound <= want,
                    f"{name}: newest width {newest}, rate {fpr}, bound {bound} (want <= {want})")
    for opts, what in ((["--fpr-bound", "0.01"], "--fpr-bound on a fixed filter"),
                       (["--same-width"], "--same-width on a fixed filter"),
                       (["--expansion", "2", "--fpr-bound", "0.01", "--same-width"],
                        "--fpr-bound with --same-width"),
                       (["--expansion", "2", "--fpr-bound", "0.001"],
                        "--fpr-bound below the first sub-filter's rate")):
        res = t.run(["create", t.path("no.cf"), "--capacity", "1000"] + opts)
        t.usage_error(res, f"create {what}")
    t.check(not os.path.exists(t.path("no.cf")), "a usage error created the file")

    # --semi-sort: a 13-bit filter in a 12-bit one's bytes, its keys found, its flag shown;
    # only for 4-slot buckets.
    sizes = {}
    for opts, name in ((["--fingerprint-bits", "12"], "plain 12"),
                       (["--fingerprint-bits", "13", "--semi-sort"], "semi-sorted 13")):
        s = t.path("semi.cf")
        res = t.run(["create", s, "--capacity", "5000", "--seed", "9", "--force", "--quiet"] +
                    opts)
        if not t.ok(res, f"create {name}", quiet=True):
            continue
        t.ok(t.run(["add", s, "-q"], input=lines([b"semi-%d" % i for i in range(5000)])),
             f"add to the {name} filter", quiet=True)
        res = t.run(["query", s, "--absent"], input=lines([b"semi-%d" % i for i in range(5000)]))
        t.check(res.rc == 0 and res.out == b"", f"{name}: keys added are missing", res)
        doc = t.info(s) or {}
        sizes[name] = doc.get("buckets")
        t.check(doc.get("semi_sorted") == ("--semi-sort" in opts),
                f"{name}: info semi_sorted is {doc.get('semi_sorted')!r}")
    t.check(len(sizes) == 2 and sizes["plain 12"] == sizes["semi-sorted 13"],
            f"semi-sorted 13 bits and plain 12 bits: buckets {sizes}")
    res = t.run(["create", t.path("no.cf"), "--capacity", "1000", "--semi-sort",
                 "--bucket-size", "2"])
    t.usage_error(res, "create --semi-sort --bucket-size 2")
    t.check(not os.path.exists(t.path("no.cf")), "a usage error created the file")


def test_add_query(t):
    t.section("add and query: arguments, stdin, --present, --absent")
    f = t.path("q.cf")
    t.ok(t.run(["create", f, "--capacity", "20000", "--fingerprint-bits", "32", "--seed", "7",
                "-q"]), "create")
    res = t.run(["add", f, "alpha", "beta", "gamma"])
    t.ok(res, "add KEY...")
    t.check(re.search(rb"added\D{0,20}3\b", res.err) is not None,
            "add: the summary on stderr does not say 3 keys were added", res)
    res = t.run(["query", f, "alpha", "delta", "beta", "gamma", "epsilon"])
    t.ok(res, "query KEY...")
    t.check(res.out == b"alpha\tyes\ndelta\tno\nbeta\tyes\ngamma\tyes\nepsilon\tno\n",
            "query KEY...: wrong output", res)
    res = t.run(["query", f], input=b"alpha\ndelta\nbeta\ngamma\nepsilon\n")
    t.check(res.rc == 0 and res.out == b"alpha\tyes\ndelta\tno\nbeta\tyes\ngamma\tyes\n"
            b"epsilon\tno\n", "query from stdin: wrong output", res)
    res = t.run(["query", f, "--present"], input=b"alpha\ndelta\nbeta\nepsilon\n")
    t.check(res.rc == 0 and res.out == b"alpha\nbeta\n", "query --present", res)
    res = t.run(["query", f, "--absent"], input=b"alpha\ndelta\nbeta\nepsilon\n")
    t.check(res.rc == 0 and res.out == b"delta\nepsilon\n", "query --absent", res)
    res = t.run(["query", f, "--absent", "alpha", "zeta"])
    t.check(res.rc == 0 and res.out == b"zeta\n", "query --absent KEY...", res)
    res = t.run(["query", f, "--present", "alpha", "zeta"])
    t.check(res.rc == 0 and res.out == b"alpha\n", "query --present KEY...", res)

    # Keys from stdin, in bulk.
    keys = [b"s-%d" % i for i in range(5000)]
    res = t.run(["add", f], input=lines(keys))
    t.ok(res, "add from stdin")
    t.check(re.search(rb"added\D{0,20}5000\b", res.err) is not None,
            "add from stdin: the summary does not say 5000 keys were added", res)
    t.check(t.items(f) == 5003, "info items is not the number of keys added")
    answers = t.query_stdin(f, keys, "query 5000 keys from stdin")
    t.check(answers is not None and all(answers), "keys added from stdin are missing")
    absent = [b"not-%d" % i for i in range(2000)]
    answers = t.query_stdin(f, absent, "query 2000 absent keys")
    t.check(answers is not None and not any(answers),
            "absent keys answered yes in a 32-bit-fingerprint filter")
    res = t.run(["verify", f])
    t.ok(res, "verify after adds")


def test_key_bytes(t):
    t.section("keys: line endings, odd bytes, -0")
    # Lines: "\n" and "\r\n" end a line and are not part of the key; a "\r" elsewhere is.
    f = t.path("lines.cf")
    t.ok(t.run(["create", f, "--capacity", "1000", "--fingerprint-bits", "32", "--seed", "3",
                "-q"]), "create")
    extra = [b"double-cr\r\r\n", b"crlf-key\r\n"]
    data = lines(LINE_KEYS, ends=[b"\n", b"\r\n"]) + b"".join(extra) + b"no-final-newline"
    res = t.run(["add", f, "--quiet"], input=data)
    t.ok(res, "add odd keys from stdin", quiet=True)
    stored = LINE_KEYS + [b"double-cr\r", b"crlf-key", b"no-final-newline"]
    t.check(t.items(f) == len(stored),
            f"items after adding {len(stored)} odd keys from stdin is {t.items(f)}")
    probes = PROBES + [b"double-cr", b"double-cr\r\r", b"crlf-key\r"]
    probes = [p for p in probes if p not in stored]
    arg_stored = [k for k in stored if not k.startswith(b"-")]
    answers = t.query_args(f, arg_stored, "query odd keys as arguments")
    if answers is not None:
        for k, a in zip(arg_stored, answers):
            t.check(a, f"key {k[:60]!r} added from a line is not found by query KEY")
    arg_probes = probes + [b"no-final-newline\n", b"plain\n", b"plain\r\n"]
    answers = t.query_args(f, arg_probes, "query probes as arguments")
    if answers is not None:
        for k, a in zip(arg_probes, answers):
            t.check(not a, f"key {k[:60]!r} was never added, yet query says yes (line "
                    "endings not stripped exactly?)")
    # The same lines through query's stdin, echoed exactly; and the library agrees.
    mixed = stored + probes
    answers = t.query_stdin(f, mixed, "query odd keys from stdin")
    lib = t.lib_answers(f, mixed)
    if answers is not None:
        t.check(answers == [True] * len(stored) + [False] * len(probes),
                "query from stdin: wrong answers for odd keys")
        t.check(answers == lib, "query from stdin differs from the library's answers")

    # Odd keys as arguments, then found through stdin.
    g = t.path("args.cf")
    t.ok(t.run(["create", g, "--capacity", "1000", "--fingerprint-bits", "32", "--seed", "4",
                "-q"]), "create")
    res = t.run(["add", g, "-q"] + ARG_KEYS)
    t.ok(res, "add odd keys as arguments", quiet=True)
    t.check(t.items(g) == len(ARG_KEYS), "items after adding odd keys as arguments")
    answers = t.query_stdin(g, ARG_KEYS, "query odd keys (added as arguments) from stdin")
    t.check(answers is not None and all(answers), "odd keys added as arguments are missing")

    # -0: NUL-separated keys, newlines and "\r\n" inside keys are kept.
    n = t.path("nul.cf")
    t.ok(t.run(["create", n, "--capacity", "1000", "--fingerprint-bits", "32", "--seed", "5",
                "-q"]), "create")
    res = t.run(["add", n, "-0", "-q"], input=b"".join(k + b"\0" for k in NUL_KEYS))
    t.ok(res, "add -0", quiet=True)
    t.check(t.items(n) == len(NUL_KEYS), f"items after add -0 of {len(NUL_KEYS)} keys is "
            f"{t.items(n)}")
    probes0 = [p for p in PROBES if p not in NUL_KEYS]
    mixed = NUL_KEYS + probes0
    answers = t.query_stdin(n, mixed, "query -0", nul=True)
    lib = t.lib_answers(n, mixed, nul=True)
    if answers is not None:
        t.check(answers == [True] * len(NUL_KEYS) + [False] * len(probes0),
                "query -0: wrong answers (keys with newlines)")
        t.check(answers == lib, "query -0 differs from the library's answers")
    arg_keys = [k for k in NUL_KEYS if not k.startswith(b"-")]
    answers = t.query_args(n, arg_keys, "query keys with newlines as arguments")
    t.check(answers is not None and all(answers),
            "keys added with -0 are not found when given as arguments")
    res = t.run(["query", n, "-0", "--absent"], input=b"".join(k + b"\0" for k in mixed))
    t.check(res.rc == 0 and res.out == b"".join(p + b"\0" for p in probes0),
            "query -0 --absent: wrong records", res)
    res = t.run(["query", n, "-0", "--present"], input=b"".join(k + b"\0" for k in mixed))
    t.check(res.rc == 0 and res.out == b"".join(k + b"\0" for k in NUL_KEYS),
            "query -0 --present: wrong records", res)


def test_unique_count_delete(t):
    t.section("add --unique, count, delete")
    f = t.path("c.cf")
    t.ok(t.run(["create", f, "--capacity", "1000", "--fingerprint-bits", "32", "--seed", "9",
                "-q"]), "create")
    res = t.run(["add", f, "--unique", "u1", "u2", "u1", "u1"])
    t.ok(res, "add --unique")
    t.check(re.search(rb"added\D{0,20}2\b", res.err) is not None
            and re.search(rb"present\D{0,20}2\b", res.err) is not None,
            "add --unique: the summary does not say 2 added, 2 already present", res)
    t.check(t.items(f) == 2, "add --unique stored duplicates")
    res = t.run(["add", f, "--unique", "-q", "u1", "u2"])
    t.ok(res, "add --unique of keys all present", quiet=True)
    t.check(t.items(f) == 2, "add --unique of present keys changed items")

    res = t.run(["add", f, "k3", "k3", "k3", "other"])
    t.ok(res, "add a key three times")
    t.check(t.items(f) == 6, "add without --unique: items is not 2 + 4")
    res = t.run(["count", f, "k3", "other", "never"])
    t.ok(res, "count")
    c3 = None
    m = re.fullmatch(rb"k3\t(\d+)\nother\t(\d+)\nnever\t(\d+)\n", res.out)
    if t.check(m is not None, "count: output is not KEY<TAB>N per key", res):
        c3, c_other, c_never = (int(x) for x in m.groups())
        t.check(c3 >= 3, f"count of a key added 3 times is {c3}", res)
        t.check(c_other >= 1, "count of a key added once is 0", res)
        t.check(c_never == 0, "count of a never-added key in a 32-bit filter is not 0", res)
    res = t.run(["delete", f, "k3", "never"])
    t.ok(res, "delete")
    t.check(re.search(rb"deleted\D{0,20}1\b", res.err) is not None
            and re.search(rb"not found\D{0,20}1\b", res.err) is not None,
            "delete: the summary does not say 1 deleted, 1 not found", res)
    t.check(t.items(f) == 5, "delete did not remove one copy")
    res = t.run(["count", f, "k3"])
    m = re.fullmatch(rb"k3\t(\d+)\n", res.out)
    if t.check(res.rc == 0 and m is not None, "count after delete", res) and c3 is not None:
        t.check(int(m.group(1)) == c3 - 1, f"count after one delete is {m.group(1)}, was {c3}")
    res = t.run(["delete", f, "-q"], input=b"k3\nk3\n")
    t.ok(res, "delete from stdin --quiet", quiet=True)
    res = t.run(["query", f, "k3", "other"])
    t.check(res.rc == 0 and res.out == b"k3\tno\nother\tyes\n",
            "a key deleted as often as it was added is still found", res)
    t.check(t.items(f) == 3, "items after deleting k3 three times")


def test_info(t):
    t.section("info, info --json against the library")
    f = t.path("info.cf")
    t.ok(t.run(["create", f, "--capacity", "30000", "--seed", "11", "--bucket-size", "4",
                "--fingerprint-bits", "14", "-q"]), "create")
    t.ok(t.run(["add", f, "-q"], input=lines([b"i%d" % i for i in range(12345)])), "add")
    res = t.run(["info", f])
    t.ok(res, "info (text)")
    text = res.out.lower()
    for word in (b"capacity", b"fingerprint", b"bucket", b"items", b"30000", b"12345"):
        t.check(word in text, f"info (text) does not mention {word!r}", res)
    doc, lib = t.info(f), t.lib_stats(f)
    if doc and lib:
        t.check(doc.get("items") == 12345, f"info items is {doc.get('items')}, 12345 added")
        for key, want in lib.items():
            got = doc.get(key)
            if isinstance(want, float):
                good = isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=1e-6,
                                                                      abs_tol=1e-12)
            else:
                good = got == want
            t.check(good, f"info --json {key} is {got!r}, the library says {want!r}")
        for key in ("capacity", "fingerprint_bits", "bucket_size", "max_kicks", "expansion",
                    "seed", "items", "load_factor", "fpr"):
            t.check(key in doc, f"info --json has no {key!r}")
        if doc.get("slots") and doc.get("table_bytes"):
            bps = doc.get("bits_per_slot")
            t.check(isinstance(bps, (int, float)) and math.isclose(
                bps, doc["table_bytes"] * 8 / doc["slots"], rel_tol=1e-6),
                f"info bits_per_slot {bps!r} is not table bits / slots")
            bpi = doc.get("bits_per_item")
            if doc.get("load_factor", 0) >= 0.5:
                t.check(isinstance(bpi, (int, float)) and math.isclose(
                    bpi, doc["table_bytes"] * 8 / doc["items"], rel_tol=1e-6),
                    f"info bits_per_item {bpi!r} is not table bits / items")
            else:  # below half load it would say how empty the filter is
                t.check(bpi is None, f"info bits_per_item {bpi!r} below half load, not null")
        if doc.get("slots"):
            in_tables = doc["items"] - doc.get("stashed", 0)
            t.check(math.isclose(doc.get("load_factor", -1), in_tables / doc["slots"],
                                 rel_tol=1e-6), "info load_factor is not (items - stashed) / slots")
        full = doc.get("fpr_at_full_load")
        t.check(isinstance(full, float) and math.isclose(full, full_load_fpr(14, 4),
                                                         rel_tol=1e-6),
                f"info fpr_at_full_load {full!r} is not the bound for f=14, b=4")
        t.check(doc.get("file_bytes") == os.path.getsize(f), "info file_bytes is not the size")
    # Past half load, bits per item is table bits over items.
    t.ok(t.run(["add", f, "-q"], input=lines([b"j%d" % i for i in range(10000)])), "add more")
    doc = t.info(f)
    if doc:
        bpi = doc.get("bits_per_item")
        t.check(doc.get("load_factor", 0) >= 0.5 and isinstance(bpi, (int, float)) and
                math.isclose(bpi, doc["table_bytes"] * 8 / doc["items"], rel_tol=1e-6),
                f"info bits_per_item {bpi!r} at load {doc.get('load_factor')}")


def test_build(t):
    t.section("build: from a file, stdin, -0; duplicates")
    keys = [b"b-%d-%x" % (i, t.rng.getrandbits(32)) for i in range(4000)]
    dups = [keys[t.rng.randrange(len(keys))] for _ in range(1500)]
    allk = keys + dups
    t.rng.shuffle(allk)
    inp = t.path("build-in.txt")
    write(inp, lines(allk, ends=[b"\n", b"\r\n"]))
    want_f, _ = expected_bits(1e-8, 4)

    out1 = t.path("build-file.cf")
    res = t.run(["build", out1, "--fpr", "1e-8", inp])
    t.ok(res, "build FILE --fpr P INPUT")
    t.all_present(out1, inp, "build from a file")
    doc = t.info(out1)
    if doc:
        t.check(doc.get("items") == len(keys), f"build: items {doc.get('items')} for "
                f"{len(keys)} distinct keys (duplicates must be added once)")
        t.check(doc.get("fingerprint_bits") == want_f,
                f"build --fpr 1e-8: {doc.get('fingerprint_bits')}-bit fingerprints, want {want_f}")
        # Sized to the set, not to the lines: repeats would otherwise leave it part empty.
        t.check(doc.get("capacity") == len(keys), f"build: capacity {doc.get('capacity')} for "
                f"{len(keys)} distinct keys in {len(allk)} lines")
    t.ok(t.run(["verify", out1]), "verify a built file")

    # Two overlapping lists: the filter is as full as one built from their union.
    union = t.path("build-union.cf")
    both = keys[:3000] + keys[1000:]
    res = t.run(["build", union, "--seed", "7", "-q"], input=lines(both))
    t.ok(res, "build two overlapping lists", quiet=True)
    doc = t.info(union)
    if doc:
        t.check(doc.get("capacity") == len(keys) and doc.get("load_factor", 0) > 0.9,
                f"build of overlapping lists: capacity {doc.get('capacity')}, load "
                f"{doc.get('load_factor')} for {len(keys)} distinct keys")
    # The same set in another order, repeated otherwise, with the same seed: the same file.
    again = t.path("build-again.cf")
    shuffled = list(reversed(keys)) + keys[:10]
    res = t.run(["build", again, "--seed", "7", "-q"], input=lines(shuffled))
    t.ok(res, "build the same set reordered", quiet=True)
    t.check(os.path.exists(again) and os.path.exists(union) and read(again) == read(union),
            "build: the same set and seed gave another file")

    out2 = t.path("build-pipe.cf")
    res = t.run(["build", out2, "--fpr", "1e-8", "--quiet"], input=read(inp))
    t.ok(res, "build from a pipe --quiet", quiet=True)
    t.all_present(out2, inp, "build from a pipe")
    t.check(t.items(out2) == len(keys), "build from a pipe: items is not the distinct count")

    out3 = t.path("build-redirect.cf")
    res = t.run_file_stdin(["build", out3, "--fpr", "1e-8", "-q"], inp)
    t.ok(res, "build from redirected stdin", quiet=True)
    t.all_present(out3, inp, "build from redirected stdin")

    out4 = t.path("build-nul.cf")
    res = t.run(["build", out4, "--fpr", "1e-8", "-0", "-q"],
                input=b"".join(k + b"\0" for k in NUL_KEYS + NUL_KEYS[:5]))
    t.ok(res, "build -0", quiet=True)
    answers = t.query_stdin(out4, NUL_KEYS, "query -0 a filter built with -0", nul=True)
    t.check(answers is not None and all(answers), "build -0: keys missing")
    t.check(t.items(out4) == len(NUL_KEYS), "build -0: items is not the distinct count")

    res = t.run(["build", t.path("no.cf"), "--fpr", "0.01", "--fingerprint-bits", "8", inp])
    t.usage_error(res, "build --fpr with --fingerprint-bits")

    # --capacity sizes the filter instead of the set: builds of different key sets made
    # alike merge, and the merged filter holds every key of both.
    part_a, part_b = keys[:2500], keys[2000:]
    built = {}
    for name, part in (("a", part_a), ("b", part_b)):
        built[name] = t.path(f"build-cap-{name}.cf")
        res = t.run(["build", built[name], "--capacity", "10k", "--seed", "9", "-q"],
                    input=lines(part))
        t.ok(res, f"build --capacity 10k ({name})", quiet=True)
        doc = t.info(built[name])
        t.check(doc is not None and doc.get("capacity") == 10000 and
                doc.get("items") == len(part),
                f"build --capacity 10k: capacity {doc and doc.get('capacity')}, items "
                f"{doc and doc.get('items')} for {len(part)} keys")
    merged = t.path("build-cap-merged.cf")
    t.ok(t.run(["merge", merged, built["a"], built["b"], "-q"]), "merge two builds made alike",
         quiet=True)
    t.all_present(merged, inp, "merge of two builds with --capacity")
    # Segmented filters merge segment by segment: the same file for any --jobs.
    seg = {}
    for name in ("a", "b"):
        seg[name] = t.path(f"build-seg-{name}.cf")
        part = [b"%s-%d" % (name.encode(), i) for i in range(150000)]
        res = t.run(["build", seg[name], "--capacity", "600000", "--seed", "9", "--mapping",
                     "segmented", "-q"], input=lines(part))
        t.ok(res, f"build --mapping segmented ({name})", quiet=True)
    outs = []
    for jobs in ("1", "3"):
        outs.append(t.path(f"merge-jobs{jobs}.cf"))
        t.ok(t.run(["merge", outs[-1], seg["a"], seg["b"], "-q", "--jobs", jobs]),
             f"merge --jobs {jobs}", quiet=True)
    t.check(all(os.path.exists(o) for o in outs) and read(outs[0]) == read(outs[1]),
            "merge --jobs 3 wrote another file than --jobs 1")
    t.usage_error(t.run(["merge", t.path("no.cf"), seg["a"], seg["b"], "--jobs", "0"]),
                  "merge --jobs 0")
    # Fewer than the keys: a fixed filter takes what fits, saves it, and says so (exit 3).
    small = t.path("build-cap-small.cf")
    res = t.run(["build", small, "--capacity", "500", "--seed", "9"], input=lines(keys))
    t.check(res.rc == 3 and b"not added (filter full)" in res.err,
            "build --capacity 500 of 4000 keys: exit status 3 with the count of refused keys", res)
    doc = t.info(small)
    t.check(doc is not None and doc.get("capacity") == 500 and 0 < doc.get("items", 0) < len(keys),
            f"build --capacity 500: the keys that fit were not saved ({doc})")
    for bad in ("0", "x", "-5"):
        res = t.run(["build", t.path("no.cf"), "--capacity", bad, inp])
        t.usage_error(res, f"build --capacity {bad}")

    # --jobs sorts with threads: the same file as one job gives.
    for jobs in ("2", "3"):
        par = t.path(f"build-jobs{jobs}.cf")
        res = t.run(["build", par, "--seed", "7", "-q", "--jobs", jobs], input=lines(both))
        t.ok(res, f"build --jobs {jobs}", quiet=True)
        t.check(os.path.exists(par) and read(par) == read(union),
                f"build --jobs {jobs}: not the file one job builds")
    for bad in ("0", "257", "x"):
        res = t.run(["build", t.path("no.cf"), "--jobs", bad, inp])
        t.usage_error(res, f"build --jobs {bad}")
    # A segmented filter is filled by the jobs, each its own segments: the same file for
    # every --jobs (300000 keys in 1-slot buckets: 11 segments, 65536 keys a thread at least).
    many = [b"fill-%d" % i for i in range(300000)]
    many_path = t.path("build-fill.txt")
    write(many_path, lines(many + many[:500]))
    seg = {}
    for jobs in ("1", "2", "3", "4"):
        seg[jobs] = t.path(f"build-seg-jobs{jobs}.cf")
        res = t.run(["build", seg[jobs], "--seed", "11", "--mapping", "segmented",
                     "--bucket-size", "1", "--jobs", jobs, many_path])
        t.ok(res, f"build --mapping segmented --jobs {jobs}")
        t.check(b"added %d, already present 500" % len(many) in res.out + res.err,
                f"build --jobs {jobs}: the counts of added and repeated keys", res)
    t.check(all(read(seg[j]) == read(seg["1"]) for j in seg),
            "build --mapping segmented: --jobs 2, 3, 4 give other files than --jobs 1")
    doc = t.info(seg["4"])
    t.check(doc is not None and doc.get("mapping") == "segmented" and doc.get("segments") == 11
            and doc.get("format_version") == 3 and doc.get("items") == len(many),
            f"build --mapping segmented: info says {doc}")
    t.all_present(seg["4"], many_path, "build --mapping segmented --jobs 4")
    # Without --seed too: every key there, each once.
    filled = t.path("build-fill.cf")
    res = t.run(["build", filled, "--jobs", "3", "--mapping", "segmented", many_path])
    t.ok(res, "build --jobs 3 without --seed")
    t.all_present(filled, many_path, "build --jobs 3 without --seed")
    t.check(t.items(filled) == len(many), "build --jobs 3: items is not the distinct count")
    # The mapping option: three values, and the any-size mapping is version 2's.
    res = t.run(["build", t.path("no.cf"), "--mapping", "ring", inp])
    t.usage_error(res, "build --mapping ring")
    anysize = t.path("build-any.cf")
    t.ok(t.run(["build", anysize, "--mapping", "any-size", "-q", inp]), "build --mapping any-size",
         quiet=True)
    doc = t.info(anysize)
    t.check(doc is not None and doc.get("mapping") == "any-size" and doc.get("format_version") == 2,
            f"build --mapping any-size: info says {doc}")


def test_merge(t):
    t.section("merge: filters made alike, their keys in one")
    keys_a = [b"ma-%d" % i for i in range(3000)]
    keys_b = [b"mb-%d" % i for i in range(2000)] + keys_a[:100]
    files = {}
    for name, keys in (("a", keys_a), ("b", keys_b)):
        files[name] = t.path(f"merge-{name}.cf")
        t.ok(t.run(["create", files[name], "--capacity", "10000", "--seed", "3", "-q"]),
             f"create merge-{name}", quiet=True)
        t.ok(t.run(["add", files[name], "-q"], input=lines(keys)), f"add to merge-{name}",
             quiet=True)
    out = t.path("merge-out.cf")
    res = t.run(["merge", out, files["a"], files["b"]])
    t.ok(res, "merge OUT A B")
    t.check(b"merged" in res.err, "merge: no summary line", res)
    answers = t.query_stdin(out, keys_a + keys_b, "query the merged filter")
    t.check(answers is not None and all(answers), "merge: a key of an input is not found")
    t.check(t.items(out) == len(keys_a) + len(keys_b), "merge: items do not add up")
    res = t.run(["count", out, keys_a[0].decode(), keys_a[200].decode()])
    t.check(res.rc == 0 and res.out == b"%s\t2\n%s\t1\n" % (keys_a[0], keys_a[200]),
            "merge: a key of both inputs must count 2, of one 1", res)
    t.ok(t.run(["verify", out]), "verify a merged file")
    # Into an existing file: refused without --force; with it, OUT among the inputs.
    res = t.run(["merge", out, files["a"], files["b"]])
    t.file_error(res, out, "merge onto an existing OUT without --force")
    res = t.run(["merge", "--force", "-q", out, out, files["a"]])
    t.ok(res, "merge --force OUT OUT A", quiet=True)
    res = t.run(["count", out, keys_a[0].decode()])
    t.check(res.out == b"%s\t3\n" % keys_a[0], "merge OUT OUT A: counts must add up", res)
    # Filters that differ, filters that do not fit, inputs that cannot be read: nothing saved.
    other = t.path("merge-other.cf")
    t.ok(t.run(["create", other, "--capacity", "10000", "--seed", "4", "-q"]), "create other",
         quiet=True)
    small = t.path("merge-small.cf")
    t.ok(t.run(["create", small, "--capacity", "10000", "--seed", "3", "-q"]), "create small",
         quiet=True)
    t.ok(t.run(["add", small, "-q"], input=lines([b"ms-%d" % i for i in range(9000)])),
         "fill small", quiet=True)
    bad = t.path("merge-bad.cf")
    write(bad, read(files["a"])[:-3])
    none = t.path("merge-none.cf")
    for inputs, what, text in (([files["a"], other], "seeds that differ", b"seeds differ"),
                               ([files["a"], small], "a merge that does not fit", b"do not fit"),
                               ([files["a"], bad], "a truncated input", b"merge-bad.cf"),
                               ([files["a"], t.path("merge-missing.cf")], "a missing input",
                                b"merge-missing.cf")):
        res = t.run(["merge", none] + inputs)
        t.file_error(res, inputs[1], f"merge with {what}")
        t.check(text in res.err, f"merge with {what}: the message does not say why", res)
        t.check(not os.path.exists(none), f"merge with {what}: OUT was written")
    t.usage_error(t.run(["merge", none]), "merge with OUT alone")
    t.usage_error(t.run(["merge"]), "merge without operands")


def test_quiet_progress(t):
    t.section("--quiet and --progress")
    f = t.path("p.cf")
    t.ok(t.run(["create", f, "--capacity", "100000", "--seed", "1", "-q"]), "create")
    batch = [t.path(f"p-{i}.txt") for i in range(4)]
    for i, b in enumerate(batch):
        write(b, lines([b"p%d-%d" % (i, j) for j in range(20000)]))
    plain = t.run_file_stdin(["add", f], batch[0])
    t.ok(plain, "add (summary)")
    t.check(plain.err != b"", "add without --quiet printed no summary", plain)
    prog = t.run_file_stdin(["add", f, "--progress"], batch[1])
    t.ok(prog, "add --progress")
    t.check(prog.err.count(b"\n") > plain.err.count(b"\n"),
            "add --progress printed no progress line", prog)
    quiet = t.run_file_stdin(["add", f, "--progress", "--quiet"], batch[2])
    t.ok(quiet, "add --progress --quiet", quiet=True)
    res = t.run_file_stdin(["query", f], batch[0])
    t.ok(res, "query", quiet=True)  # no summary for lookups, no progress off a terminal
    res = t.run_file_stdin(["query", f, "--progress"], batch[1])
    t.ok(res, "query --progress")
    t.check(res.err != b"", "query --progress printed no progress line", res)
    res = t.run_file_stdin(["query", f, "--present", "--quiet"], batch[2])
    t.ok(res, "query --quiet", quiet=True)
    t.check(res.out == read(batch[2]), "query --present: keys added with --quiet missing")
    res = t.run_file_stdin(["delete", f, "--quiet"], batch[2])
    t.ok(res, "delete --quiet", quiet=True)
    res = t.run_file_stdin(["build", t.path("pb.cf"), "--progress"], batch[3])
    t.ok(res, "build --progress")
    t.check(res.err.count(b"\n") >= 2, "build --progress: no progress line", res)
    res = t.run(["verify", f])
    t.ok(res, "verify")


def test_full(t):
    t.section("exit status 3: a fixed filter fills up")
    f = t.path("full.cf")
    t.ok(t.run(["create", f, "--capacity", "200", "--fingerprint-bits", "16", "--seed", "2",
                "-q"]), "create --capacity 200")
    before = read(f)
    keys = [b"full-%d" % i for i in range(2000)]
    res = t.run(["add", f, "--quiet"], input=lines(keys))
    t.check(res.rc == 3, "add of 2000 keys to a fixed filter for 200: exit status 3", res)
    t.check(res.out == b"", "add: stdout not empty", res)
    t.check(t.one_line(res.err) and f.encode() in res.err,
            "add --quiet into a full filter: expected one error line naming the file", res)
    t.check(read(f) != before, "the keys that fit were not saved")
    t.ok(t.run(["verify", f]), "verify after exit 3")
    doc = t.info(f)
    if doc:
        items = doc.get("items", 0)
        t.check(0 < items < 2000, f"items after filling is {items}")
        missing = 2000 - items
        t.check(re.search(rb"\b%d\b" % missing, res.err) is not None,
                f"the error does not say how many keys were not added ({missing})", res)
        answers = t.query_stdin(f, keys, "query after filling")
        if answers is not None:
            t.check(sum(answers) >= items, "fewer keys found than were added")
            t.check(t.lib_answers(f, keys) == answers, "query differs from the library")
    # Without --quiet: the summary says it too, exit 3 again (with arguments this time).
    more = [b"more-%d" % i for i in range(50)]
    res = t.run(["add", f] + more)
    t.check(res.rc == 3, "add KEY... into a full filter: exit status 3", res)
    t.check(b"full" in res.err.lower() and f.encode() in res.err,
            "add into a full filter: stderr does not say the filter is full", res)
    t.ok(t.run(["verify", f]), "verify after the second exit 3")

    # A growing filter does not fill up.
    g = t.path("grow.cf")
    t.ok(t.run(["create", g, "--capacity", "200", "--expansion", "2", "--seed", "2", "-q"]),
         "create --expansion 2")
    res = t.run(["add", g, "-q"], input=lines(keys))
    t.ok(res, "add 2000 keys to a growing filter for 200", quiet=True)
    doc = t.info(g)
    t.check(doc and doc.get("items") == 2000 and doc.get("sub_filters", 0) > 1,
            f"growing filter: {doc}")
    answers = t.query_stdin(g, keys, "query a grown filter")
    t.check(answers is not None and all(answers), "a grown filter misses keys")


def test_query_threads(t):
    t.section("query --threads: the same records, in order, on one thread or two")
    f = t.path("threads.cf")
    t.ok(t.run(["create", f, "--capacity", "30000", "--fingerprint-bits", "32", "--seed", "11",
                "-q"]), "create")
    added = [b"t-%d" % i for i in range(20000)]
    t.ok(t.run(["add", f, "-q"], input=lines(added)), "add from stdin", quiet=True)
    # Several hand-overs of 4096 keys and a partial last one; present and absent keys
    # shuffled together, an empty key among them.
    keys = added + [b"absent-%d" % i for i in range(11000)] + [b""]
    t.rng.shuffle(keys)
    added_set = set(added)
    expected = b"".join(k + (b"\tyes" if k in added_set else b"\tno") + b"\n" for k in keys)
    for mode in ([], ["--present"], ["--absent"], ["-0"]):
        data = records(keys, nul=True) if mode == ["-0"] else lines(keys)
        outs = {}
        for th in ("1", "2", "7", None):
            args = ["query", f, "-q"] + mode + (["--threads", th] if th else [])
            res = t.run(args, input=data)
            if t.ok(res, f"query {' '.join(mode)} --threads {th}", quiet=True):
                outs[th] = res.out
        what = " ".join(mode) or "(yes/no)"
        t.check(len(set(outs.values())) == 1,
                f"query {what}: the records differ between thread counts {sorted(outs, key=str)}")
        if not mode and "2" in outs:
            t.check(outs["2"] == expected, "query --threads 2: wrong records")
        if mode == ["--present"] and "2" in outs:
            printed = set(outs["2"].split(b"\n"))
            t.check(added_set <= printed, "query --present --threads 2: added keys missing")
    for bad in ("0", "-1", "two", ""):
        res = t.run(["query", f, "--threads", bad], input=b"x\n")
        t.check(res.rc == 1 and res.out == b"" and t.one_line(res.err) and b"threads" in res.err,
                f"query --threads '{bad}': expected a one-line usage error", res)
    # A full stdout stops the query with one line and exit 2 on two threads as on one.
    for th in ("1", "2"):
        with open("/dev/full", "wb") as full:
            p = subprocess.run([t.tool, "query", f, "--threads", th], input=lines(keys * 4),
                               stdout=full, stderr=subprocess.PIPE, cwd=t.dir,
                               timeout=CALL_TIMEOUT)
        t.check(p.returncode == 2 and t.one_line(p.stderr) and b"stdout" in p.stderr,
                f"query --threads {th} > /dev/full: expected exit 2 and one line, got "
                f"{p.returncode} {p.stderr[:300]!r}")



def test_redisbloom_layout(t):
    t.section("--redisbloom: RedisBloom's layout, created, filled, queried, checked")
    f = t.path("rb.cf")
    t.ok(t.run(["create", f, "--capacity", "1000", "--redisbloom", "-q"]), "create --redisbloom")
    doc = t.info(f) or {}
    t.check(doc.get("layout") == "redisbloom" and doc.get("fingerprint_bits") == 8 and
            doc.get("bucket_size") == 2 and doc.get("buckets") == 512 and
            doc.get("seed") == "0x0000000000000000",
            f"info of a new RedisBloom-layout filter (1000 keys: 512 buckets of 2): {doc}")
    # One key lands where RedisBloom puts it: fingerprint h % 255 + 1 in the first slot of
    # bucket h mod 512 (the file's first table starts at byte 128: 64 + 32 + 8, aligned).
    t.ok(t.run(["add", f, "alpha", "-q"]), "add alpha")
    h = murmur64a(b"alpha")
    data = read(f)
    t.check(data[42] == 2 and data[128 + (h % 512) * 2] == h % 255 + 1,
            f"alpha is not where RedisBloom's mapping puts it (hash {h:#x})")
    keys = [b"rb-%d" % i for i in range(3000)]
    g = t.path("rbg.cf")
    t.ok(t.run(["create", g, "--capacity", "1000", "--redisbloom", "--expansion", "2",
                "--max-kicks", "20", "-q"]), "create --redisbloom --expansion 2")
    t.ok(t.run(["add", g, "-q"], input=lines(keys)), "add 3000 keys to a growing one")
    doc = t.info(g) or {}
    t.check(doc.get("sub_filters", 0) >= 2 and doc.get("same_width") is True,
            f"a growing RedisBloom-layout filter did not grow, or widened: {doc}")
    answers = t.query_stdin(g, keys, "query the keys of a RedisBloom-layout filter")
    t.check(answers is not None and all(answers), "a key of a RedisBloom-layout filter is missing")
    t.ok(t.run(["verify", g]), "verify a RedisBloom-layout filter")
    for bad in (["--seed", "3"], ["--semi-sort", "--bucket-size", "4"], ["--fpr", "0.01"],
                ["--fingerprint-bits", "12"]):
        t.usage_error(t.run(["create", t.path("x.cf"), "--capacity", "10", "--redisbloom"] + bad),
                      f"create --redisbloom {' '.join(bad)}")


def test_window(t):
    t.section("--window: filters that forget, driven by --at (and the clock)")
    f = t.path("win.cf")
    t0 = 1_700_000_000  # seconds; the window is 1h in 4 generations of 20 minutes
    t.ok(t.run(["create", f, "--capacity", "1000", "--window", "1h", "--generations", "4",
                "--seed", "5", "--at", t0, "-q"]), "create --window 1h --generations 4")
    doc = t.info(f) or {}
    t.check(doc.get("window_ms") == 3_600_000 and doc.get("generations") == 4 and
            doc.get("generation") == t0 * 1000 * 3 // 3_600_000 and
            doc.get("generation_items") == [0, 0, 0, 0],
            f"info of a new windowed filter: {doc}")
    text = t.run(["info", f])
    t.check(b"window             1h in 4 generations of 20m" in text.out and
            b"gone within 1h20m" in text.out, "info shows the window", text)
    keys = [b"w-%d" % i for i in range(300)]
    ta = t0 + 10
    t.ok(t.run(["add", f, "--at", ta, "-q"], input=lines(keys)), "add 300 keys at t0 + 10 s")
    before = read(f)
    # Found for the whole window after the add, on every read path.
    for at in (ta, ta + 1200, ta + 3599):
        res = t.run(["query", f, "--at", at, "--absent"], input=lines(keys))
        t.check(res.rc == 0 and res.out == b"", f"keys missing {at - ta} s after their add", res)
    res = t.run(["count", f, "--at", ta + 3599, keys[0]])
    t.check(res.rc == 0 and res.out == keys[0] + b"\t1\n", "count inside the window", res)
    # Gone once the generation holding them is dropped: ta lies in generation g, dropped
    # when generation g + 4 begins, at most 1h20m after the add.
    gone = (ta // 1200 + 4) * 1200
    res = t.run(["query", f, "--at", gone, "--present"], input=lines(keys))
    t.check(res.rc == 0 and res.out.count(b"\n") <= 3,
            f"keys still found at {gone - ta} s, past the window's bound", res)
    t.check(read(f) == before, "a query changed the file")
    # A write at a time before the newest generation: refused, nothing written.
    res = t.run(["add", f, "--at", t0 - 7200, "late"])
    t.file_error(res, f, "add at a time before the newest generation")
    t.check(b"before the filter's newest generation" in res.err, "the reason is given", res)
    t.check(read(f) == before, "a refused add changed the file")
    # A later write drops the expired generations from the file.
    t.ok(t.run(["add", f, "--at", gone, "fresh", "-q"]), "add after the window")
    doc = t.info(f) or {}
    t.check(doc.get("items") == 1 and doc.get("generation_items") == [0, 0, 0, 1] and
            doc.get("generation") == gone * 1000 * 3 // 3_600_000,
            f"the expired generations are not dropped: {doc}")
    t.ok(t.run(["delete", f, "--at", gone + 1, "fresh", "-q"]), "delete with --at")
    t.check((t.info(f) or {}).get("items") == 0, "delete in a windowed filter")
    # build --window: the keys in the generation due at --at; verify; the clock's time
    g = t.path("winb.cf")
    t.ok(t.run(["build", g, "--window", "15m", "--at", t0, "-q"], input=lines(keys)),
         "build --window 15m")
    doc = t.info(g) or {}
    t.check(doc.get("generations") == 8 and doc.get("items") == len(keys) and
            doc.get("generation_items", [])[-1:] == [len(keys)],
            f"build --window: default 8 generations, keys in the newest: {doc}")
    t.ok(t.run(["verify", g]), "verify a windowed file")
    res = t.run(["query", g, "--at", t0 + 60, "--absent"], input=lines(keys))
    t.check(res.rc == 0 and res.out == b"", "a built windowed filter misses keys", res)
    n = t.path("winn.cf")
    t.ok(t.run(["create", n, "--capacity", "100", "--window", "1d", "-q"]), "create at the clock")
    t.ok(t.run(["add", n, "now", "--now", "-q"]), "add --now")
    res = t.run(["query", n, "now"])
    t.check(res.out == b"now\tyes\n", "a key added now is found now", res)
    for bad in (["--window", "0"], ["--window", "3x"], ["--window", "-5s"],
                ["--generations", "4"], ["--window", "1h", "--generations", "1"],
                ["--window", "1h", "--expansion", "2"], ["--window", "1h", "--redisbloom"],
                ["--window", "1h", "--at", "yesterday"]):
        t.usage_error(t.run(["create", t.path("bad.cf"), "--capacity", "10"] + bad),
                      f"create {' '.join(bad)}")
    t.usage_error(t.run(["add", f, "--at", "-1", "k"]), "add --at -1")


def group_basic(t):
    test_help_version(t)
    test_create(t)
    test_add_query(t)
    test_query_threads(t)
    test_key_bytes(t)
    test_unique_count_delete(t)
    test_info(t)
    test_build(t)
    test_merge(t)
    test_quiet_progress(t)
    test_full(t)
    test_redisbloom_layout(t)
    test_window(t)


# ---------------------------------------------------------------------------------------
# errors: exit 1 and 2
# ---------------------------------------------------------------------------------------

def test_usage_errors(t):
    t.section("usage errors: exit 1")
    f = t.path("u.cf")
    t.ok(t.run(["create", f, "--capacity", "100", "--seed", "1", "-q"]), "create")
    before = read(f)
    x = t.path("x.cf")
    cases = [
        [], ["bogus"], ["--bogus"], ["create"], ["create", x], ["create", x, "--capacity"],
        ["create", x, "--capacity", "abc"], ["create", x, "--capacity", "-5"],
        ["create", x, "--capacity", "0"], ["create", x, "--capacity", "10", "--fpr", "1.5"],
        ["create", x, "--capacity", "10", "--fpr", "0"],
        ["create", x, "--capacity", "10", "--fpr", "0.01", "--fingerprint-bits", "8"],
        ["create", x, "--capacity", "10", "--fingerprint-bits", "3"],
        ["create", x, "--capacity", "10", "--fingerprint-bits", "33"],
        ["create", x, "--capacity", "10", "--bucket-size", "0"],
        ["create", x, "--capacity", "10", "--seed", "nope"],
        ["create", x, "--capacity", "10", "--frobnicate"], ["create", x, x, "--capacity", "10"],
        ["add"], ["add", f, "--nope"], ["query"], ["query", f, "--present", "--absent"],
        ["delete"], ["count"], ["info"], ["info", f, "--yaml"], ["verify"], ["build"],
        ["build", x, "--fpr", "2"], ["verify", f, "--bogus"],
        # --max is both --max-kicks and --max-sub-filters; -0x has no x; -q takes no value.
        ["create", x, "--capacity", "10", "--max", "3"], ["query", f, "-0x"],
        ["query", f, "--quiet=yes"], ["create", x, "--capacity", "1.5"],
        ["create", x, "--capacity", "1e"], ["create", x, "--capacity", "2e19"],
        ["create", x, "--capacity", "1.2345k"],
    ]
    for args in cases:
        res = t.run(args, input=b"k1\nk2\n")
        t.usage_error(res, "cuckoo " + " ".join(args))
    t.check(not os.path.exists(x), "a usage error created a file")
    t.check(read(f) == before, "a usage error changed a file")


def test_option_syntax(t):
    t.section("options as getopt_long takes them: bundles, prefixes, counts like 1e6")
    # Each spelling makes the same file as the plain one.
    plain = t.path("plain.cf")
    t.ok(t.run(["create", plain, "--capacity", "1500000", "--bucket-size", "2", "--seed", "3",
                "--quiet"]), "create", quiet=True)
    for i, args in enumerate((["--cap", "1.5e6", "--bucket=2", "--seed", "3", "-q"],
                              ["--capacity=1.5M", "--bucket-s", "2", "--seed=3", "--qu"],
                              ["--ca", "1500k", "--b", "2", "--see", "0x3", "-q"])):
        other = t.path(f"spelled-{i}.cf")
        res = t.run(["create", other] + args)
        t.ok(res, "create " + " ".join(args), quiet=True)
        t.check(os.path.exists(other) and read(other) == read(plain),
                f"create {' '.join(args)} made another filter than the plain options")
    # Short options bundle: -0q is -0 -q.
    res = t.run(["add", plain, "-0q"], input=b"k1\0k2\0")
    t.ok(res, "add -0q", quiet=True)
    res = t.run(["query", plain, "-0q", "--pres"], input=b"k1\0k2\0k3\0")
    t.ok(res, "query -0q --pres", quiet=True)
    t.check(res.out.split(b"\0")[:2] == [b"k1", b"k2"], "query -0q: not NUL-separated keys", res)
    res = t.run(["create", t.path("ambiguous.cf"), "--capacity", "10", "--se", "3"])
    t.usage_error(res, "create --se (--seed or --semi-sort)")


def test_verify_json(t):
    t.section("verify --json: an object per file, in order; exit 2 if any is bad")
    good = t.path("vj-good.cf")
    t.ok(t.run(["build", good, "--seed", "1", "-q"], input=b"a\nb\nc\n"), "build", quiet=True)
    bad = t.path("vj-bad.cf")
    write(bad, read(good)[:-1])
    missing = t.path('vj-"missing".cf')
    res = t.run(["verify", "--json", good, bad, missing])
    t.check(res.rc == 2, f"verify --json with bad files: exit {res.rc}, not 2", res)
    t.check(res.err.count(NL) == 2, "verify --json: not one stderr line per bad file", res)
    try:
        doc = json.loads(res.out)
    except ValueError as e:
        t.check(False, f"verify --json printed no JSON: {e}", res)
        return
    t.check(isinstance(doc, list) and [d.get("file") for d in doc] == [good, bad, missing],
            f"verify --json: files {doc!r}")
    if isinstance(doc, list) and len(doc) == 3:
        t.check(doc[0].get("ok") is True and doc[0].get("items") == 3 and
                doc[0].get("bytes") == os.path.getsize(good) and doc[0].get("sub_filters") == 1,
                f"verify --json of a good file: {doc[0]!r}")
        t.check(doc[1].get("ok") is False and "truncated" in doc[1].get("error", ""),
                f"verify --json of a truncated file: {doc[1]!r}")
        t.check(doc[2].get("ok") is False and "No such file" in doc[2].get("error", ""),
                f"verify --json of a missing file: {doc[2]!r}")
    res = t.run(["verify", "--json", good])
    t.ok(res, "verify --json of a good file", quiet=True)


def test_missing_and_directory(t):
    t.section("missing file, directory as FILE: exit 2")
    missing = t.path("missing.cf")
    d = t.path("a-directory")
    os.mkdir(d)
    for target, label in ((missing, "missing file"), (d, "directory")):
        for args in (["add", target, "k"], ["add", target], ["query", target, "k"],
                     ["query", target], ["delete", target, "k"], ["count", target, "k"],
                     ["info", target], ["info", target, "--json"], ["verify", target]):
            res = t.run(args, input=b"k1\nk2\n")
            t.file_error(res, target, f"{args[0]} on a {label}")
        t.check(not os.path.exists(missing), f"a command on a {label} created the file")
    t.check(os.path.isdir(d) and os.listdir(d) == [], "a command changed the directory")
    res = t.run(["create", d, "--capacity", "10"])
    t.file_error(res, d, "create over a directory without --force")
    res = t.run(["create", d, "--capacity", "10", "--force"])
    t.file_error(res, d, "create --force over a directory")
    t.check(os.path.isdir(d), "create --force replaced a directory")
    inp = t.path("keys.txt")
    write(inp, b"a\nb\n")
    res = t.run(["build", d, inp])
    t.file_error(res, d, "build into a directory")
    res = t.run(["build", t.path("b.cf"), t.path("no-input.txt")])
    t.file_error(res, t.path("no-input.txt"), "build from a missing input")
    t.check(not os.path.exists(t.path("b.cf")), "build from a missing input made FILE")
    res = t.run(["build", t.path("b.cf"), d])
    t.file_error(res, d, "build from a directory as input")
    t.check(not os.path.exists(t.path("b.cf")), "build from a directory made FILE")
    t.check(tmp_leftovers(t.dir, "b.cf") == [], "failed builds left temporary files")


def damage_cases(data):
    """(label, bytes) of damaged copies: one flipped byte in the header, the descriptor,
    the metadata checksum, the table and the trailer; truncations and extensions."""
    n = int.from_bytes(data[56:60], "little")
    s = data[43]
    meta_len = 64 + 32 * n + 16 * s + 8
    t0 = (meta_len + 63) // 64 * 64
    l0 = int.from_bytes(data[64 + 24:64 + 32], "little")
    total = len(data)
    flips = [("magic", 1), ("version", 8), ("total length", 17), ("seed", 24),
             ("capacity", 33), ("fingerprint bits", 40), ("bucket size", 41),
             ("max kicks", 44), ("reserved", 61), ("descriptor items", 64 + 8),
             ("meta checksum", meta_len - 8), ("padding", meta_len + 1),
             ("table start", t0), ("table middle", t0 + l0 // 2), ("table end", t0 + l0 - 1),
             ("trailer first byte", total - 8), ("trailer last byte", total - 1)]
    cases = []
    for label, off in flips:
        b = bytearray(data)
        b[off] ^= 0x5A
        cases.append((f"byte {off} ({label}) flipped", bytes(b)))
    for length in sorted({0, 1, 7, 8, 9, 63, 64, 65, meta_len - 1, meta_len, t0,
                          t0 + l0 // 2, total - 9, total - 8, total - 1}):
        cases.append((f"truncated to {length} of {total} bytes", data[:length]))
    cases.append(("one zero byte appended", data + b"\0"))
    cases.append(("64 zero bytes appended", data + bytes(64)))
    return cases


def test_corrupt(t):
    t.section("corrupt and truncated files: exit 2, file unchanged")
    good = t.path("good.cf")
    t.ok(t.run(["create", good, "--capacity", "3000", "--seed", "77", "-q"]), "create")
    t.ok(t.run(["add", good, "-q"], input=lines([b"c%d" % i for i in range(1500)])), "add")
    data = read(good)
    f = t.path("bad.cf")
    for label, bad in damage_cases(data):
        write(f, bad)
        res = t.run(["verify", f])
        if t.file_error(res, f, f"verify of a file with {label}"):
            line = res.err.decode("utf-8", "replace")
            t.check(len(line) > len(f) + 16, f"verify ({label}): no reason given", res)
        for args in (["add", f, "new-key"], ["add", f, "-q"], ["delete", f, "c1"]):
            res = t.run(args, input=b"k1\nk2\n")
            t.file_error(res, f, f"{args[0]} on a file with {label}")
            t.check(read(f) == bad, f"{args[0]} on a file with {label} changed the file")
        for args in (["query", f, "c1"], ["count", f, "c1"], ["info", f, "--json"]):
            res = t.run(args)
            t.file_error(res, f, f"{args[0]} on a file with {label}")
    t.check(tmp_leftovers(t.dir, "bad.cf") == [], "temporary files left behind")
    t.ok(t.run(["verify", good]), "verify of the intact original")


def test_unwritable(t):
    t.section("unwritable destinations: exit 2, nothing changed")
    inp = t.path("keys.txt")
    write(inp, b"a\nb\nc\n")
    regular = t.path("regular-file")
    write(regular, b"not a directory\n")
    for dest, label in ((t.path("no-such-dir/x.cf"), "a missing directory"),
                        (os.path.join(regular, "x.cf"), "a regular file as directory")):
        res = t.run(["create", dest, "--capacity", "100"])
        t.file_error(res, dest, f"create in {label}")
        res = t.run(["build", dest, inp])
        t.file_error(res, dest, f"build in {label}")
        res = t.run(["build", dest], input=b"a\nb\n")
        t.file_error(res, dest, f"build from stdin in {label}")
    t.check(read(regular) == b"not a directory\n", "the regular file was changed")
    t.check(not os.path.exists(t.path("no-such-dir")), "a missing directory was created")

    # add and delete when FILE is readable but its directory is not writable. chmod does
    # not stop root, so as root the tool runs as user nobody.
    ro = t.path("read-only")
    os.mkdir(ro)
    f = os.path.join(ro, "f.cf")
    t.ok(t.run(["create", f, "--capacity", "100", "--seed", "5", "-q"]), "create")
    t.ok(t.run(["add", f, "-q", "present"]), "add")
    before = read(f)
    kw = {}
    if os.geteuid() == 0:
        kw = {"user": 65534, "group": 65534, "extra_groups": []}
        os.chmod(t.dir, 0o755)
        os.chmod(ro, 0o755)
        os.chmod(f, 0o644)
        probe = t.run(["--version"], **kw)
        if probe.rc != 0:
            print(f"note: cannot run the tool as user nobody ({probe.err[:200]!r}); "
                  "skipping the read-only directory case")
            return
    else:
        os.chmod(ro, 0o555)
    try:
        res = t.run(["query", f, "present"], **kw)
        t.check(res.rc == 0 and res.out == b"present\tyes\n",
                "query in a read-only directory", res)
        res = t.run(["add", f, "k1", "k2"], **kw)
        t.file_error(res, f, "add in a read-only directory")
        t.check(read(f) == before, "a failed add changed the file")
        res = t.run(["add", f, "-q"], input=b"k1\nk2\n", **kw)
        t.file_error(res, f, "add from stdin in a read-only directory")
        t.check(read(f) == before, "a failed add changed the file")
        res = t.run(["delete", f, "present"], **kw)
        t.file_error(res, f, "delete in a read-only directory")
        t.check(read(f) == before, "a failed delete changed the file")
        t.check(sorted(os.listdir(ro)) == ["f.cf"], "files left in the read-only directory")
    finally:
        os.chmod(ro, 0o755)
        os.chmod(t.dir, 0o700)


def group_errors(t):
    test_usage_errors(t)
    test_option_syntax(t)
    test_verify_json(t)
    test_missing_and_directory(t)
    test_corrupt(t)
    test_unwritable(t)


# ---------------------------------------------------------------------------------------
# kill9: SIGKILL at random moments never leaves a partial file
# ---------------------------------------------------------------------------------------

KILL_DIR_FILES = ["kill.cf", "batch.txt", "committed.txt", "stderr.txt"]


def test_scale():
    """CF_TEST_SCALE: a positive number, 1 unless set."""
    s = float(os.environ.get("CF_TEST_SCALE") or 1)
    if not 0 < s < 1e6:
        raise ValueError(f"CF_TEST_SCALE={s}: want a positive number")
    return s


def sanitized_share():
    """The share of the kills a sanitizer build runs (CF_TEST_SANITIZED, set by CMake)."""
    return 0.5 if os.environ.get("CF_TEST_SANITIZED") else 1.0


def group_kill9(t):
    iterations = int(os.environ.get("CF_KILL_ITERATIONS") or
                     max(50, round(200 * test_scale() * sanitized_share())))
    capacity = 500_000
    name = "kill.cf"
    f = t.path(name)
    batch_path = t.path("batch.txt")
    committed_path = t.path("committed.txt")
    err_path = t.path("stderr.txt")

    def new_epoch():
        res = t.run(["create", f, "--capacity", capacity, "--seed", t.rng.getrandbits(64),
                     "--force", "--quiet"])
        t.ok(res, "create (new epoch)", quiet=True)
        write(committed_path, b"")
        return 0  # keys committed in this epoch

    # Batches are made from one template by bytes.replace (fast, which matters in the
    # sanitizer build): "@0\n@1\n..." with "@" replaced by a prefix unique to the batch.
    template = b"".join(b"@%d\n" % j for j in range(150_000))
    ends = [0]
    for j in range(150_000):
        ends.append(ends[-1] + len(b"@%d\n" % j))

    def make_batch(i):
        size = t.rng.randint(100_000, 150_000)
        prefix = b"i%d-%x-" % (i, t.rng.getrandbits(32))
        write(batch_path, template[:ends[size]].replace(b"@", prefix))
        return size

    def start_add():
        with open(batch_path, "rb") as stdin, open(err_path, "wb") as err:
            return subprocess.Popen([t.tool, "add", f, "--quiet"], stdin=stdin,
                                    stdout=subprocess.DEVNULL, stderr=err, cwd=t.dir)

    # Calibration: how long an uninterrupted add takes here, so that the kill delays span
    # the whole run (reading keys, inserting, writing the file, renaming) on this machine
    # and build (the sanitizer build is several times slower). The delays then adapt:
    # each completed run shortens the next ones a little, each killed one lengthens them
    # less, so that about a quarter of the runs complete whatever the load of the machine.
    # Nothing is asserted about timing.
    committed = new_epoch()
    durations = []
    for i in range(3):
        make_batch(-1 - i)
        start = time.monotonic()
        p = start_add()
        rc = p.wait()
        durations.append(time.monotonic() - start)
        t.check(rc == 0, f"calibration add: exit status {rc}: {read(err_path)[:300]!r}")
    scale = min(durations)
    print(f"an uninterrupted add takes about {scale * 1000:.1f} ms here", flush=True)
    committed = new_epoch()

    killed_pids = set()
    outcomes = {"completed": 0, "killed, old file kept": 0,
                "killed mid-write (temporary file left)": 0,
                "killed after the rename (new file in place)": 0}
    old = read(f)
    old_items = 0
    size = None  # the pending batch: kept until a run commits it, then a new one
    for i in range(iterations):
        if size is None:
            size = make_batch(i)
            if committed + size > 0.8 * capacity:
                committed = new_epoch()
                old, old_items = read(f), 0
        # Half the delays anywhere in the run (up to 1.3 times its usual length, so some
        # runs complete), half near its end, where the file is written and renamed.
        delay = scale * (t.rng.uniform(0.0, 1.3) if t.rng.random() < 0.5
                         else t.rng.uniform(0.6, 1.1))
        p = start_add()
        time.sleep(delay)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        rc = p.wait()
        new = read(f) if os.path.exists(f) else None
        leftovers = tmp_leftovers(t.dir, name)
        what = f"iteration {i} (delay {delay * 1000:.1f} ms, exit {rc})"
        if not t.check(new is not None, f"{what}: FILE disappeared"):
            break
        if rc == 0:
            outcome = "completed"
            t.check(new != old, f"{what}: add succeeded but the file did not change")
            t.check(leftovers == [], f"{what}: a completed add left {leftovers}")
        elif rc == -signal.SIGKILL:
            killed_pids.add(p.pid)
            if new == old:
                outcome = ("killed mid-write (temporary file left)" if leftovers
                           else "killed, old file kept")
            else:
                outcome = "killed after the rename (new file in place)"
            # Killed runs' temporaries stay until a run reaches its save, which removes
            # them (their writers are dead): a completed run leaves none (checked above).
            t.check(all(any(f".tmp-{k}-" in e for k in killed_pids) for e in leftovers),
                    f"{what}: temporary files {leftovers} of no killed run (pid {p.pid})")
        else:
            t.check(False, f"{what}: add failed: {read(err_path)[:300]!r}")
            break
        outcomes[outcome] += 1
        scale *= 0.97 if rc == 0 else 1.01
        stray = [e for e in os.listdir(t.dir) if e not in KILL_DIR_FILES + leftovers]
        t.check(stray == [], f"{what}: unexpected files {stray}")

        res = t.run(["verify", f])
        if not t.check(res.rc == 0, f"{what}: verify fails after the kill", res):
            break
        items = t.items(f)
        if new == old:
            t.check(items == old_items, f"{what}: same bytes, different items")
        else:
            # A new file holds the whole batch: never some of it.
            if not t.check(items == old_items + size,
                           f"{what}: new file with {items} items; the old one had {old_items}"
                           f" and the batch {size}: a partial file"):
                break
            t.all_present(f, batch_path, f"{what}: the batch in the new file")
            if committed:
                t.all_present(f, committed_path, f"{what}: earlier batches in the new file")
            with open(committed_path, "ab") as c, open(batch_path, "rb") as b:
                c.write(b.read())
            committed += size
            old, old_items = new, items
            size = None
        if t.failures:
            break
    # One more add, uninterrupted: it removes whatever the killed runs left.
    write(batch_path, b"last\n")
    t.ok(t.run(["add", f, "--quiet"], input=b"last\n"), "the last add")
    stray = [e for e in os.listdir(t.dir) if e not in KILL_DIR_FILES]
    t.check(stray == [], f"stray files in the directory after a completed add: {stray}")
    print("kill loop outcomes: " + ", ".join(f"{k}: {v}" for k, v in outcomes.items()),
          flush=True)
    killed = sum(v for k, v in outcomes.items() if k != "completed")
    print(f"{killed} killed, {outcomes['completed']} completed; final delay scale "
          f"{scale * 1000:.1f} ms", flush=True)


# ---------------------------------------------------------------------------------------
# writers: concurrent changes, links, owners, special files
# ---------------------------------------------------------------------------------------

def test_two_writers(t):
    t.section("two writers")
    f = t.path("shared.cf")
    t.ok(t.run(["create", f, "--capacity", 10000, "--quiet"]), "create shared.cf")
    # Two shells, each adding 100 keys one command at a time, at once.
    procs = []
    for w in ("a", "b"):
        script = "".join(f'"$1" add "$2" --quiet {w}{i} || exit 1\n' for i in range(100))
        procs.append(subprocess.Popen(["sh", "-c", script, "sh", t.tool, f], cwd=t.dir,
                                      stderr=subprocess.PIPE))
    for p in procs:
        _, err = p.communicate(timeout=CALL_TIMEOUT)
        t.check(p.returncode == 0, f"a writer failed ({p.returncode}): {err[:300]!r}")
    keys = [f"{w}{i}".encode() for w in ("a", "b") for i in range(100)]
    answers = t.lib_answers(f, keys)
    lost = [k for k, a in zip(keys, answers) if not a]
    t.check(not lost, f"{len(lost)} of 200 keys added by two concurrent writers are "
            f"missing: {lost[:8]}")
    t.check(t.items(f) == 200, f"items after 200 adds: {t.items(f)}")
    t.check(tmp_leftovers(t.dir, "shared.cf") == [], "temporary files left by the writers")


def test_lock_wait(t):
    t.section("lock: wait, --no-wait")
    import fcntl
    f = t.path("locked.cf")
    t.ok(t.run(["create", f, "--capacity", 1000, "--quiet"]), "create locked.cf")
    before = read(f)
    with open(f, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        for cmd in ("add", "delete"):
            res = t.run([cmd, f, "--no-wait", "k"])
            t.file_error(res, f, f"{cmd} --no-wait on a locked file")
            t.check(b"another command is changing" in res.err,
                    f"{cmd} --no-wait names the reason", res)
            t.check(read(f) == before, f"{cmd} --no-wait changed the locked file")
        # Without --no-wait, add waits for the lock, then goes on.
        p = subprocess.Popen([t.tool, "add", f, "--quiet", "waited"], cwd=t.dir,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.3)
        t.check(p.poll() is None, "add did not wait for the lock")
        t.check(read(f) == before, "add changed the file while another held its lock")
    out, err = p.communicate(timeout=CALL_TIMEOUT)
    t.check(p.returncode == 0, f"add after the lock was released: {p.returncode} {err!r}")
    t.check(t.lib_answers(f, [b"waited"]) == [True], "the waiting add's key is missing")


def test_links_and_owners(t):
    t.section("symbolic links, owners, modes")
    target, link = t.path("target.cf"), t.path("link.cf")
    t.ok(t.run(["create", target, "--capacity", 1000, "--quiet"]), "create target.cf")
    os.symlink("target.cf", link)
    os.chmod(target, 0o640)
    root = os.geteuid() == 0
    if root:
        os.chown(target, 65534, 65534)
    t.ok(t.run(["add", link, "--quiet", "through-link"]), "add through a link")
    t.ok(t.run(["delete", link, "--quiet", "through-link"]), "delete through a link")
    t.ok(t.run(["add", link, "--quiet", "kept"]), "add through a link again")
    t.check(os.path.islink(link) and os.readlink(link) == "target.cf",
            "the update replaced the symbolic link")
    t.check(t.lib_answers(target, [b"kept"]) == [True], "the link's target lacks the key")
    st = os.stat(target)
    t.check(st.st_mode & 0o7777 == 0o640, f"mode {st.st_mode & 0o7777:o}, not 640")
    if root:
        t.check((st.st_uid, st.st_gid) == (65534, 65534),
                f"owner {st.st_uid}:{st.st_gid}, not 65534:65534 as before the update")
    else:
        print("   (not root: a file of another owner cannot be tested)", flush=True)
    # create --force through the link replaces the target, not the link.
    t.ok(t.run(["create", link, "--capacity", 50, "--force", "--quiet"]), "create --force link")
    t.check(os.path.islink(link), "create --force replaced the link")
    t.check(t.lib_answers(target, [b"kept"]) == [False], "create --force: the old filter")


def test_special_files(t):
    t.section("create --force over special files")
    fifo = t.path("special.fifo")
    os.mkfifo(fifo)
    nodes = [fifo]
    if os.geteuid() == 0:
        dev = t.path("null.dev")  # a character device like /dev/null, in our own directory
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        nodes.append(dev)
    link = t.path("to-fifo.cf")
    os.symlink("special.fifo", link)
    for node in nodes + [link]:
        before = os.lstat(node)
        for cmd in (["create", node, "--capacity", 10, "--force"],
                    ["build", node, "--force"]):
            res = t.run(cmd, input=b"k\n")
            t.file_error(res, node, f"{cmd[0]} --force over {os.path.basename(node)}")
            t.check(b"not a regular file" in res.err, f"{cmd[0]}: names the reason", res)
            after = os.lstat(node)
            t.check((after.st_ino, after.st_mode) == (before.st_ino, before.st_mode),
                    f"{cmd[0]} --force replaced {os.path.basename(node)}")


def waiting_for_input(pid, tool):
    """Is process pid the tool (not yet the parent's fork before exec), has it set its
    handlers of SIGINT, SIGTERM and SIGHUP, and is it asleep in a wait for input (its
    pipe empty)?"""
    if os.readlink(f"/proc/{pid}/exe") != os.path.realpath(tool):
        return False
    with open(f"/proc/{pid}/status") as st:
        caught = int(re.search(r"SigCgt:\s*([0-9a-f]+)", st.read()).group(1), 16)
    want = sum(1 << (s - 1) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    with open(f"/proc/{pid}/wchan") as w:
        where = w.read()
    return caught & want == want and any(x in where for x in ("poll", "select", "pipe_read"))


def test_stopped_by_signals(t):
    """`tail -f log | cuckoo add seen.cf` never sees the end of its input: stopped by
    SIGINT, SIGTERM or SIGHUP it saves every key it read before the signal, then dies of
    it; --save-every saves while it waits for more."""
    t.section("add and delete stopped by a signal, --save-every")
    f = t.path("stream.cf")
    t.ok(t.run(["create", f, "--capacity", 10000, "--quiet"]), "create stream.cf")
    for n, (sig, cmd) in enumerate(((signal.SIGINT, "add"), (signal.SIGTERM, "add"),
                                    (signal.SIGHUP, "add"), (signal.SIGTERM, "delete"))):
        keys = [b"s%d-%d" % (n if cmd == "add" else 1, i) for i in range(300)]
        p = subprocess.Popen([t.tool, cmd, f], cwd=t.dir, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdin.write(b"".join(k + b"\n" for k in keys))
        p.stdin.flush()  # and the pipe stays open: the command waits for more
        # until every key is read: the command then waits in the kernel for more
        deadline = time.time() + CALL_TIMEOUT
        while time.time() < deadline and not waiting_for_input(p.pid, t.tool):
            time.sleep(0.02)
        p.send_signal(sig)
        p.wait(timeout=CALL_TIMEOUT)  # stdin still open: no end of input can come first
        err = p.stderr.read()
        p.stdin.close()
        p.stdout.close()
        p.stderr.close()
        t.check(p.returncode == -sig, f"{cmd} stopped by {sig.name}: exit {p.returncode}, not "
                f"death by the signal ({err!r})")
        t.check(b"stopped by signal" in err, f"{cmd} stopped by {sig.name}: says nothing "
                f"({err!r})")
        answers = t.lib_answers(f, keys)
        want = [cmd == "add"] * len(keys)
        if cmd == "delete":  # the keys of round 1, deleted: found no more (or a rare FP)
            t.check(sum(answers) <= 3, f"delete stopped by {sig.name}: {sum(answers)} of "
                    f"{len(keys)} keys still found")
        else:
            t.check(answers == want, f"add stopped by {sig.name}: "
                    f"{answers.count(False)} of {len(keys)} keys lost")
    t.check(tmp_leftovers(t.dir, "stream.cf") == [], "temporary files left")
    # --save-every: the keys are in the file while the command still waits for more, and
    # a kill -9 then loses none of them.
    keys = [b"periodic-%d" % i for i in range(200)]
    p = subprocess.Popen([t.tool, "add", f, "--save-every", "200ms", "--quiet"], cwd=t.dir,
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(b"".join(k + b"\n" for k in keys))
    p.stdin.flush()
    deadline = time.time() + CALL_TIMEOUT
    while time.time() < deadline and t.lib_answers(f, keys[-1:]) != [True]:
        time.sleep(0.05)
    p.kill()
    p.communicate(timeout=CALL_TIMEOUT)
    p.stdin.close()
    t.check(t.lib_answers(f, keys) == [True] * len(keys),
            "--save-every: keys added before a kill -9 were lost")
    # ... and delete's: the deletes are in the file while it waits.
    p = subprocess.Popen([t.tool, "delete", f, "--save-every", "200ms", "--quiet"], cwd=t.dir,
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(b"".join(k + b"\n" for k in keys[:100]))
    p.stdin.flush()
    deadline = time.time() + CALL_TIMEOUT
    while time.time() < deadline and sum(t.lib_answers(f, keys[:100])) > 3:
        time.sleep(0.05)
    p.kill()
    p.communicate(timeout=CALL_TIMEOUT)
    p.stdin.close()
    t.check(sum(t.lib_answers(f, keys[:100])) <= 3 and
            t.lib_answers(f, keys[100:]) == [True] * 100,
            "--save-every: deletes before a kill -9 were not saved, or took other keys")
    res = t.run(["add", f, "--save-every", "0s", "k"])
    t.check(res.rc == 1, "--save-every 0s is a usage error", res)


def group_writers(t):
    test_two_writers(t)
    test_lock_wait(t)
    test_stopped_by_signals(t)
    test_links_and_owners(t)
    test_special_files(t)


# ---------------------------------------------------------------------------------------
# build_1m: a million keys
# ---------------------------------------------------------------------------------------

def group_build_1m(t):
    n = 1_000_000
    fpr = 0.001
    present_path, absent_path = t.path("present.txt"), t.path("absent.txt")
    present = [f"k{i:07d}.{t.rng.getrandbits(40):010x}".encode() for i in range(n)]
    absent = [f"a{i:07d}.{t.rng.getrandbits(40):010x}".encode() for i in range(n)]
    write(present_path, lines(present))
    write(absent_path, lines(absent))
    del absent

    f = t.path("million.cf")
    t.section("build 1M keys from a file")
    res = t.run(["build", f, "--fpr", repr(fpr), present_path, "--quiet"])
    if not t.ok(res, "build of 1M keys", quiet=True):
        return
    t.ok(t.run(["verify", f]), "verify the 1M-key file")
    doc = t.info(f)
    if not doc:
        return
    want_f, _ = expected_bits(fpr, doc.get("bucket_size", 4))
    t.check(doc.get("fingerprint_bits") == want_f,
            f"build --fpr {fpr}: {doc.get('fingerprint_bits')}-bit fingerprints, want {want_f}")
    # Set semantics: a key that is a false positive of earlier ones counts as present.
    t.check(n * (1 - 2 * fpr) <= doc.get("items", 0) <= n,
            f"build of {n} distinct keys stored {doc.get('items')} items")
    lib = t.lib_stats(f)
    if lib:
        for key in ("items", "slots", "fingerprint_bits", "bucket_size", "capacity", "seed"):
            t.check(doc.get(key) == lib.get(key),
                    f"info {key} {doc.get(key)!r}, library {lib.get(key)!r}")

    t.section("query the 1M keys")
    res = t.run_file_stdin(["query", f], present_path)
    expected = b"".join(k + b"\tyes\n" for k in present)
    if not t.check(res.rc == 0 and res.out == expected, "query of the 1M keys built: not all "
                   "KEY<TAB>yes in order", res):
        got = res.out.split(b"\n")
        bad = [g for g, k in zip(got, present) if g != k + b"\tyes"][:5]
        t.check(False, f"first wrong records: {bad!r}")
    del expected
    lib_present = t.run_file_stdin(["query", f], present_path, tool=t.lib)
    t.check(lib_present.rc == 0 and lib_present.out == b"1" * n + b"\n",
            "the library misses keys of the built file", lib_present)

    t.section("query 1M absent keys")
    res = t.run_file_stdin(["query", f], absent_path)
    yes = None
    if t.check(res.rc == 0, "query of 1M absent keys", res):
        recs = res.out.split(b"\n")
        t.check(len(recs) == n + 1 and recs[-1] == b"", "query: not one record per key")
        tool_bits = bytes(ord("1") if r.endswith(b"\tyes") else ord("0") for r in recs[:-1])
        t.check(all(r.endswith(b"\tyes") or r.endswith(b"\tno") for r in recs[:-1]),
                "query: records that are neither yes nor no")
        yes = tool_bits.count(b"1")
        lib_absent = t.run_file_stdin(["query", f], absent_path, tool=t.lib)
        if t.check(lib_absent.rc == 0, "library query", lib_absent):
            t.check(lib_absent.out[:-1] == tool_bits,
                    "the tool's answers for absent keys differ from the library's: "
                    f"{sum(a != b for a, b in zip(lib_absent.out, tool_bits))} keys")
        bound = 3 * doc.get("fpr", 0) + 2e-4
        print(f"false positives: {yes} of {n} ({yes / n:.6f}); info fpr {doc.get('fpr')}, "
              f"bound {bound:.6f}", flush=True)
        t.check(yes / n <= bound, f"false-positive rate {yes / n} above {bound}")
        t.check(doc.get("fpr", 1) <= fpr * 1.0001,
                f"info fpr {doc.get('fpr')} above the --fpr asked for ({fpr})")

    t.section("build 1M keys from a pipe")
    g = t.path("million-pipe.cf")
    res = t.run(["build", g, "--fpr", repr(fpr), "-q"], input=read(present_path))
    if t.ok(res, "build of 1M keys from a pipe", quiet=True):
        t.all_present(g, present_path, "build of 1M keys from a pipe")
        doc2 = t.info(g)
        t.check(doc2 and doc2.get("items") and abs(doc2["items"] - doc.get("items", 0))
                <= 2 * fpr * n, "build from a pipe: items differ much from the file build")


# ---------------------------------------------------------------------------------------

GROUPS = {"basic": group_basic, "errors": group_errors, "kill9": group_kill9,
          "writers": group_writers, "build_1m": group_build_1m}


def main(argv):
    if len(argv) != 4 or argv[3] not in GROUPS:
        sys.stderr.write(__doc__)
        return 2
    tool, lib, group = os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3]
    seed = int(os.environ.get("CF_TEST_SEED") or DEFAULT_SEED)
    print(f"cli test {group}: tool {tool}, seed {seed} (CF_TEST_SEED)", flush=True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"cuckoo-cli-{group}-") as d:
        t = Tester(tool, lib, group, seed, d)
        try:
            GROUPS[group](t)
        except Exception:
            t.failures.append("exception:\n" + traceback.format_exc())
            print(t.failures[-1], flush=True)
    elapsed = time.monotonic() - start
    if t.failures:
        print(f"\n{len(t.failures)} of {t.checks} checks FAILED in {group} "
              f"({elapsed:.1f} s); seed {seed}: rerun with CF_TEST_SEED={seed}", flush=True)
        return 1
    print(f"{group}: all {t.checks} checks passed in {elapsed:.1f} s (seed {seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
