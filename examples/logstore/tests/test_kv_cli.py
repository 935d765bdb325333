#!/usr/bin/env python3
"""End-to-end tests of `cuckoo-kv`, the log-structured key/value store of examples/logstore
(spec: examples/logstore/README.md; C API: examples/logstore/kvstore.h).

Usage: test_kv_cli.py CUCKOO_KV GROUP

  CUCKOO_KV  the tool (build/cuckoo-kv)
  GROUP      basic      every command and option: put/get/del/list/stats/import/export/
                        compact/batch, `put KEY -`, --sync, --name, `import -`, `export -`;
                        byte-exact values, the escaping of list and batch, the batch protocol
                        (strict escaping, a line-by-line batch over a pipe, batch creating the
                        store), exit statuses 0/1/2/3; usage errors (nothing created), no
                        store, damaged logs (refused, with the offset: any byte of a record
                        in the middle, a damaged header of the last one), torn last records
                        (cut off), a store in use, unwritable export paths, exports with
                        deleted records or of names never imported; stats (its exact lines)
                        against an exact model of the log, whose every record is checked
                        byte by byte as README lays it out (XXH3 checks included)
             roundtrip  the acceptance test: a 50 MB text file imported, every other key
                        fetched and deleted in one batch, put back in another, exported:
                        byte-identical to the original
             crash      `import` killed with SIGKILL at random moments, many times, in fresh
                        and continuing stores: the store opens, every fully written record
                        survived, the live records are a prefix of the file's distinct
                        records, and a final import exports byte-identical

Environment: CF_TEST_SEED (an integer) fixes the randomness (printed at the start and on
failure); CF_TEST_SCALE (a float, default 1) scales the sizes (the roundtrip file is 50 MiB
at scale 1) and the number of kills (halved in a sanitizer build, where CMake sets
CF_TEST_SANITIZED); CF_KILL_ITERATIONS overrides the number of kills. The
tests use Python's standard library only (XXH3-64 included, for the log's checks), work in a
temporary directory and make no timing assertions (timings are printed for information),
except that a batch driven line by line must answer each command within ANSWER_TIMEOUT
seconds, so that a batch that holds its answers back fails instead of hanging the test.
"""
import filecmp
import hashlib
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

DEFAULT_SEED = 20241121
CALL_TIMEOUT = 900  # seconds for one run of the tool (the sanitizer build is slower)
ANSWER_TIMEOUT = 30  # seconds a line-by-line batch may take to answer one command
NL = b"\n"

LOG_NAME = "cuckoo-kv.log"
COMPACT_NAME = "cuckoo-kv.log.compact"
HEADER = 32                      # bytes of the log's header
REC_HEAD = 16                    # a record's header: type, 3 zero bytes, lengths, check
HEAD_CHECKED = 12                # the header bytes its check covers
FRAME = 24                       # bytes of a record around its key and value
MAX_RECORD = 65536               # import cuts longer lines into records of this size
MAX_KEY = 65536
MANIFEST_PREFIX = b"cuckoo-kv:import:"
DEFAULT_MANIFEST = MANIFEST_PREFIX + b"default"
HEX_KEY = re.compile(rb"[0-9a-f]{32}")


def scale():
    try:
        s = float(os.environ.get("CF_TEST_SCALE") or 1)
    except ValueError:
        s = 1.0
    return s if s > 0 else 1.0


# ---------------------------------------------------------------------------------------
# Escaping (README, "Escaping"): bytes '!'..'~' stand for themselves except '\', which is
# '\\'; every other byte is \xNN with two lowercase hex digits.
# ---------------------------------------------------------------------------------------

SAFE = bytes(c for c in range(0x21, 0x7F) if c != 0x5C)
SAFE_OR_BACKSLASH = SAFE + b"\\"
ESC = [bytes([c]) if c in SAFE else (b"\\\\" if c == 0x5C else b"\\x%02x" % c)
       for c in range(256)]
UNESC_HEX = re.compile(rb"\\x([0-9a-f]{2})")
UNESC_ANY = re.compile(rb"\\(\\|x[0-9a-f]{2})")


def escape(data):
    need = data.translate(None, SAFE)
    if not need:
        return data
    if b"\\" in need:
        data = data.replace(b"\\", b"\\\\")  # first: the others only add safe bytes
    for c in set(need):
        if c != 0x5C:
            data = data.replace(bytes([c]), ESC[c])
    return data


def unescape(text):
    """The bytes of an escaped string; ValueError unless it is exactly the README's
    escaping of them (so lowercase hex, no needless escapes, no raw bytes)."""
    if text.translate(None, SAFE_OR_BACKSLASH):
        raise ValueError(f"raw bytes outside '!'..'~' in {text[:80]!r}")
    if b"\\" not in text:
        return text
    if b"\\\\" not in text:
        out = text
        for h in set(UNESC_HEX.findall(text)):
            out = out.replace(b"\\x" + h, bytes([int(h, 16)]))
    else:
        out = UNESC_ANY.sub(lambda m: b"\\" if m.group(1) == b"\\"
                            else bytes([int(m.group(1)[1:], 16)]), text)
    if escape(out) != text:
        raise ValueError(f"not the README's escaping: {text[:80]!r}")
    return out


# ---------------------------------------------------------------------------------------
# Import's records, as README says: one per line, its "\n" included; a line over 64 KiB is
# cut into 64 KiB records; each distinct record is stored once.
# ---------------------------------------------------------------------------------------

def split_records(data):
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    out = []
    for line in lines:
        if len(line) <= MAX_RECORD:
            out.append(line)
        else:
            out.extend(line[i:i + MAX_RECORD] for i in range(0, len(line), MAX_RECORD))
    return out


def distinct(records):
    return list(dict.fromkeys(records))


def framed(klen, vlen=0):
    return FRAME + klen + vlen


def manifest_framed(name, nrecords):
    return framed(len(MANIFEST_PREFIX + name), 16 * nrecords)


# ---------------------------------------------------------------------------------------
# The log's checks (README, "The log"): XXH3-64, here in plain Python (xxHash 0.8), so that
# the test can read a log as README lays it out and forge damage that passes some checks
# ---------------------------------------------------------------------------------------

M64 = (1 << 64) - 1
P32_1, P32_2, P32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
P64_1, P64_2, P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
P64_4, P64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
K_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")


def _r64(b, i):
    return int.from_bytes(b[i:i + 8], "little")


def _r32(b, i):
    return int.from_bytes(b[i:i + 4], "little")


def _fold(a, b):
    p = a * b
    return (p ^ (p >> 64)) & M64


def _avalanche(h):
    h ^= h >> 37
    h = (h * 0x165667919E3779F9) & M64
    return h ^ (h >> 32)


def _xxh64_avalanche(h):
    h ^= h >> 33
    h = (h * P64_2) & M64
    h ^= h >> 29
    h = (h * P64_3) & M64
    return h ^ (h >> 32)


def _mix16(b, i, s, j, seed):
    return _fold(_r64(b, i) ^ ((_r64(s, j) + seed) & M64),
                 _r64(b, i + 8) ^ ((_r64(s, j + 8) - seed) & M64))


def xxh3_64(data, seed=0):
    """XXH3-64 of data with a 64-bit seed (xxHash 0.8), in pure Python."""
    b, n, s, seed = bytes(data), len(data), K_SECRET, seed & M64
    if 8 < n <= 16:
        lo = _r64(b, 0) ^ (((_r64(s, 24) ^ _r64(s, 32)) + seed) & M64)
        hi = _r64(b, n - 8) ^ (((_r64(s, 40) ^ _r64(s, 48)) - seed) & M64)
        swapped = int.from_bytes(lo.to_bytes(8, "little"), "big")
        return _avalanche((n + swapped + hi + _fold(lo, hi)) & M64)
    if 4 <= n <= 8:
        seed ^= int.from_bytes((seed & 0xFFFFFFFF).to_bytes(4, "little"), "big") << 32
        x = (_r32(b, n - 4) + (_r32(b, 0) << 32)) ^ (((_r64(s, 8) ^ _r64(s, 16)) - seed) & M64)
        x ^= ((x << 49 | x >> 15) & M64) ^ ((x << 24 | x >> 40) & M64)
        x = (x * 0x9FB21C651E98DF25) & M64
        x ^= (x >> 35) + n
        x = (x * 0x9FB21C651E98DF25) & M64
        return x ^ (x >> 28)
    if 0 < n < 4:
        c = (b[0] << 16) | (b[n >> 1] << 24) | b[n - 1] | (n << 8)
        return _xxh64_avalanche(c ^ (((_r32(s, 0) ^ _r32(s, 4)) + seed) & M64))
    if n == 0:
        return _xxh64_avalanche(seed ^ _r64(s, 56) ^ _r64(s, 64))
    if n <= 128:
        acc = n * P64_1
        if n > 32:
            if n > 64:
                if n > 96:
                    acc += _mix16(b, 48, s, 96, seed) + _mix16(b, n - 64, s, 112, seed)
                acc += _mix16(b, 32, s, 64, seed) + _mix16(b, n - 48, s, 80, seed)
            acc += _mix16(b, 16, s, 32, seed) + _mix16(b, n - 32, s, 48, seed)
        acc += _mix16(b, 0, s, 0, seed) + _mix16(b, n - 16, s, 16, seed)
        return _avalanche(acc & M64)
    if n <= 240:
        acc = n * P64_1
        for i in range(8):
            acc += _mix16(b, 16 * i, s, 16 * i, seed)
        acc = _avalanche(acc & M64)
        for i in range(8, n // 16):
            acc += _mix16(b, 16 * i, s, 16 * (i - 8) + 3, seed)
        acc += _mix16(b, n - 16, s, 136 - 17, seed)
        return _avalanche(acc & M64)
    # Long input: stripes of 64 bytes, the secret derived from the seed.
    if seed:
        s = b"".join(((_r64(K_SECRET, i) + seed) & M64).to_bytes(8, "little")
                     + ((_r64(K_SECRET, i + 8) - seed) & M64).to_bytes(8, "little")
                     for i in range(0, len(K_SECRET), 16))
    acc = [P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1]
    per_block = (len(s) - 64) // 8  # stripes per block: each moves 8 bytes along the secret
    block = 64 * per_block
    sk = [[_r64(s, 8 * j + 8 * i) for i in range(8)] for j in range(per_block)]
    last_key = [_r64(s, len(s) - 64 - 7 + 8 * i) for i in range(8)]
    scramble = [_r64(s, len(s) - 64 + 8 * i) for i in range(8)]

    def stripe(off, keys):
        for i in range(8):
            v = _r64(b, off + 8 * i)
            k = v ^ keys[i]
            acc[i ^ 1] = (acc[i ^ 1] + v) & M64
            acc[i] = (acc[i] + (k & 0xFFFFFFFF) * (k >> 32)) & M64

    blocks = (n - 1) // block
    for blk in range(blocks):
        for j in range(per_block):
            stripe(blk * block + 64 * j, sk[j])
        for i in range(8):
            a = acc[i]
            acc[i] = (((a ^ (a >> 47)) ^ scramble[i]) * P32_1) & M64
    for j in range(((n - 1) - block * blocks) // 64):
        stripe(blocks * block + 64 * j, sk[j])
    stripe(n - 64, last_key)
    r = n * P64_1
    for i in range(4):
        r += _fold(acc[2 * i] ^ _r64(s, 11 + 16 * i), acc[2 * i + 1] ^ _r64(s, 11 + 16 * i + 8))
    return _avalanche(r & M64)


def le32(b, i):
    return int.from_bytes(b[i:i + 4], "little")


def le64(b, i):
    return int.from_bytes(b[i:i + 8], "little")


def head_check(head, offset):
    """The header check of a record at `offset` whose header starts with `head`."""
    return xxh3_64(head[:HEAD_CHECKED], offset) & 0xFFFFFFFF


def reseal_head(log, offset):
    """log with the header check of the record at offset recomputed for its header bytes:
    a header that passes its check whatever it says."""
    b = bytearray(log)
    b[offset + HEAD_CHECKED:offset + REC_HEAD] = head_check(b[offset:offset + HEAD_CHECKED],
                                                            offset).to_bytes(4, "little")
    return bytes(b)


def parse_log(log):
    """The records of a whole, closed log as (offset, type, key, value), every field and
    check as README lays them out; ValueError says what is wrong, and where."""
    if len(log) < HEADER:
        raise ValueError(f"{len(log)} bytes, shorter than the log's header")
    if log[:8] != b"CUCKOOKV" or le32(log, 8) != 1 or le32(log, 12) != 0:
        raise ValueError(f"the header is not CUCKOOKV, version 1, flags 0: {log[:16]!r}")
    if le64(log, 24) != xxh3_64(log[:24], 0):
        raise ValueError("the header's checksum (bytes 24..31) is not XXH3-64 of bytes 0..23")
    view = memoryview(log)
    recs = []
    off = HEADER
    while off < len(log):
        h = log[off:off + REC_HEAD]
        if len(h) < REC_HEAD:
            raise ValueError(f"record at offset {off}: {len(h)} bytes, fewer than a header")
        typ, klen, vlen = h[0], le32(h, 4), le32(h, 8)
        if typ not in (1, 2) or h[1:4] != b"\0\0\0" or not 1 <= klen <= MAX_KEY \
                or vlen > 2 ** 30 or (typ == 2 and vlen):
            raise ValueError(f"record at offset {off}: a header no writer makes: {h!r}")
        if le32(h, HEAD_CHECKED) != head_check(h, off):
            raise ValueError(f"record at offset {off}: bytes 12..15 are not the low 32 bits of "
                             "XXH3-64 of bytes 0..11 seeded with the offset")
        end = off + FRAME + klen + vlen
        if end > len(log):
            raise ValueError(f"record at offset {off}: {end - off} bytes, past the end of the log")
        if le64(log, end - 8) != xxh3_64(view[off:end - 8], off):
            raise ValueError(f"record at offset {off}: its last 8 bytes are not XXH3-64 of the "
                             "rest seeded with the offset")
        key = log[off + REC_HEAD:off + REC_HEAD + klen]
        recs.append((off, typ, key, log[off + REC_HEAD + klen:end - 8]))
        off = end
    return recs


# ---------------------------------------------------------------------------------------
# Text: realistic lines from a fixed vocabulary
# ---------------------------------------------------------------------------------------

WORDS = """the of and to in is was for on that with as by at from it be this are an or have
not which but had were all one their has been can more if will would when there so out what
up about into only other new some could time these may than then also two first any like
over such our after most made even where many through back years much before go good well
way down should because each just those people how too little state world very still own see
men work long here between both life being under never day same another know while last
might great old off come since against came right used take three states himself few house
use during without again place around however home small found thought went say part once
general high upon school every does got united left number course war until always away
something fact though water less public put think almost hand enough far took head yet
government system better set told nothing night end why called didn find look going asked
later knew point next program city business give group toward young days let room president
side social given present several order national possible rather second face per among
form important often things looked early white case john become large big need four within
felt along children saw best church ever least power development light thing seemed family
interest want members mind country area others done turned although open god service
certain kind problem began different door thus help sense means whole matter perhaps itself
york times law human line above name example action company hands local show whether five
history gave today either act feet across taken past quite anything seen having death week
ERROR WARN INFO DEBUG GET POST 200 404 500 http://example.org/index.html /var/log/syslog
user=alice id=42 3.14159 -1 0x7fff 2024-06-11T12:00:00Z 'quoted' "double" (paren) [bracket]
{brace} a=b;c=d x<y>z tilde~ caret^ pipe| at@host hash# 100% $HOME &amp; under_score
C:\\Windows\\system32 back\\slash caf\u00e9 na\u00efve Z\u00fcrich \u6771\u4eac
\u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439\u0442\u0435 emoji\U0001F426
""".split()
VOCAB = [w.encode("utf-8") for w in WORDS] + [b"\t", b"tab\tinside", b"ctrl\x01\x7f",
                                               b"latin1:\xe9\xff", b"cr\rmid"]


def gen_text(rng, target, long_lines=True):
    """Deterministic text of at least `target` bytes: lines of varied length (mostly short,
    some long, a few over 64 KiB), some empty, some repeated, some ending in "\\r"; the
    last line has no newline."""
    boiler = [b" ".join(rng.choices(VOCAB, k=rng.randint(1, 15))) for _ in range(150)]
    boiler += [b"-" * 72, b"}", b"    return 0;", b"# " + b"=" * 40]
    lines = []
    size = 0
    long_every = max(1, target // 6_000_000)  # lines over 64 KiB: about 8 in a large file
    n_long = 0

    def long_line():
        # Exactly at the 64 KiB boundaries now and then, otherwise anywhere to 200 KB.
        n = rng.choice([MAX_RECORD - 1, MAX_RECORD, MAX_RECORD + 1, 2 * MAX_RECORD,
                        rng.randint(MAX_RECORD, 200_000), rng.randint(MAX_RECORD, 200_000)])
        line = (b" ".join(rng.choices(VOCAB, k=n // 3)))[:n]
        return line + b"x" * (n - len(line))

    while size < target:
        r = rng.random()
        if r < 0.04:
            line = b""
        elif r < 0.10:
            line = rng.choice(boiler)
        elif r < 0.103:
            line = b" ".join(rng.choices(VOCAB, k=rng.randint(150, 1500)))
        elif long_lines and r < 0.1031 and rng.randrange(long_every) == 0:
            line = long_line()
            n_long += 1
        else:
            line = b" ".join(rng.choices(VOCAB, k=min(int(rng.expovariate(1 / 11)) + 1, 200)))
            if rng.random() < 0.01:
                line += b"\r"
        lines.append(line)
        size += len(line) + 1
    if long_lines and not n_long:
        lines.insert(rng.randrange(len(lines)), long_line())
        lines.insert(rng.randrange(len(lines)), b"y" * (2 * MAX_RECORD + 1))
    if not lines[-1]:
        lines[-1] = b"the end"
    return b"\n".join(lines)  # the last line has no newline


# ---------------------------------------------------------------------------------------
# Running the tool and recording failures
# ---------------------------------------------------------------------------------------

def short(data, limit=600):
    if data is None:
        return "None"
    text = repr(data[:limit])
    return text + (f" ... ({len(data)} bytes)" if len(data) > limit else "")


def argtext(a):
    if isinstance(a, bytes):
        a = a.decode("utf-8", "backslashreplace")
    a = str(a)
    return a if len(a) <= 80 else a[:60] + f"...({len(a)} chars)"


class Result:
    def __init__(self, argv, rc, out, err, stdin_note=""):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err
        self.stdin_note = stdin_note

    def describe(self):
        args = " ".join(argtext(a) for a in self.argv[1:])
        return (f"    $ {os.path.basename(self.argv[0])} {args[:600]}{self.stdin_note}\n"
                f"    exit status {self.rc}\n"
                f"    stdout: {short(self.out)}\n    stderr: {short(self.err)}")


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def sha(data):
    return hashlib.sha256(data).hexdigest()[:16]


def numbers_in(text):
    """Every integer in text, decimal or 0x hex."""
    found = set()
    for m in re.finditer(rb"0x([0-9a-fA-F]+)|(\d+)", text):
        found.add(int(m.group(1), 16) if m.group(1) else int(m.group(2)))
    return found


STAT_FIELDS = ("records", "live_keys", "log_bytes", "live_bytes", "dead_bytes", "index_slots",
               "index_bytes", "index_load", "bytes_per_key", "rehashes", "truncated",
               "torn_offset", "torn_records")
STAT_RATIOS = ("index_load", "bytes_per_key")  # decimal numbers; the others are counts
STAT_LINE = re.compile(r"([a-z_]+): (\d+(?:\.(\d+))?)")


def parse_stats(out):
    """stats output as ({name: number}, [problems]). README: one `name: value` line for each
    of STAT_FIELDS, and nothing else. Counts must be integers; a ratio's entry under
    name + "_tol" is half a unit of its last printed digit (what rounding may change)."""
    text = out.decode("utf-8", "replace")
    fields, problems = {}, []
    if not text.endswith("\n"):
        problems.append("the output does not end with a newline")
    for line in text.splitlines():
        m = STAT_LINE.fullmatch(line)
        if not m:
            problems.append(f"a line that is not `name: number`: {line[:80]!r}")
            continue
        name, value, decimals = m.group(1), m.group(2), m.group(3)
        if name not in STAT_FIELDS:
            problems.append(f"a field README does not name: {name}")
        elif name in fields:
            problems.append(f"{name} twice")
        elif name in STAT_RATIOS:
            fields[name] = float(value)
            fields[name + "_tol"] = 0.5 * 10 ** -len(decimals or "") + 1e-9
        elif decimals is not None:
            problems.append(f"{name} is a count, not {value}")
        else:
            fields[name] = int(value)
    missing = [f for f in STAT_FIELDS if f not in fields]
    if missing:
        problems.append(f"no line for {', '.join(missing)}")
    return fields, problems


class Tester:
    def __init__(self, tool, group, seed, workdir):
        self.tool, self.group, self.seed, self.dir = tool, group, seed, workdir
        self.rng = random.Random(f"{seed}/{group}")
        self.failures = []
        self.checks = 0
        self.notes = []

    # -- recording --------------------------------------------------------------------
    def check(self, cond, msg, res=None):
        self.checks += 1
        if not cond:
            text = msg + ("\n" + res.describe() if res is not None else "")
            self.failures.append(text)
            print("FAIL: " + text, flush=True)
        return bool(cond)

    def note(self, msg):
        self.notes.append(msg)
        print("note: " + msg, flush=True)

    def section(self, name):
        print(f"-- {name}", flush=True)

    def path(self, *names):
        return os.path.join(self.dir, *names)

    # -- running ----------------------------------------------------------------------
    def run(self, args, input=None, stdin=None, timeout=CALL_TIMEOUT):
        """Runs the tool with args (str, bytes or numbers). stdin is /dev/null unless
        `input` (bytes, through a pipe) or `stdin` (an open file) is given."""
        argv = [self.tool] + [a if isinstance(a, bytes) else str(a) for a in args]
        note = ""
        if input is not None:
            note = f"  <<< {short(input, 200)}"
        elif stdin is None:
            stdin = subprocess.DEVNULL
        p = subprocess.run(argv, input=input, stdin=stdin, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, cwd=self.dir, timeout=timeout)
        return Result(argv, p.returncode, p.stdout, p.stderr, note)

    # -- expectations -----------------------------------------------------------------
    def ok(self, res, what):
        return self.check(res.rc == 0, f"{what}: expected exit status 0", res)

    def one_line(self, err):
        return err.endswith(b"\n") and err.count(b"\n") == 1

    def error2(self, res, what, names=(), rc=2, stdout_empty=True):
        """Exit status rc, one line on stderr naming each of `names` (str or bytes)."""
        problems = []
        if res.rc != rc:
            problems.append(f"exit status {res.rc}, not {rc}")
        if stdout_empty and res.out != b"":
            problems.append("output on stdout")
        if not self.one_line(res.err):
            problems.append(f"{res.err.count(NL)} lines on stderr, not 1")
        for n in names:
            nb = os.fsencode(n) if isinstance(n, str) else n
            if nb not in res.err:
                problems.append(f"stderr does not name {argtext(n)}")
        return self.check(not problems, f"{what}: " + "; ".join(problems), res)

    def usage_error(self, res, what):
        problems = []
        if res.rc != 1:
            problems.append(f"exit status {res.rc}, not 1 (bad command line)")
        if res.out != b"":
            problems.append("output on stdout")
        if not self.one_line(res.err):
            problems.append(f"{res.err.count(NL)} lines on stderr, not 1")
        return self.check(not problems, f"{what}: " + "; ".join(problems), res)

    # -- the store's views ------------------------------------------------------------
    def stats(self, d, what):
        """stats of d as {README's field name: number}, or None."""
        res = self.run([d, "stats"])
        if not self.ok(res, f"{what}: stats"):
            return None
        fields, problems = parse_stats(res.out)
        if res.err:
            problems.append("output on stderr")
        if not self.check(not problems, f"{what}: stats is not README's `name: value` lines: "
                          + "; ".join(problems), res):
            return None
        fields["_res"] = res
        return fields

    def list_keys(self, d, what):
        """The keys `list` prints (unescaped), or None."""
        res = self.run([d, "list"])
        if not self.ok(res, f"{what}: list"):
            return None
        if not self.check(res.out == b"" or res.out.endswith(NL),
                          f"{what}: list output does not end with a newline", res):
            return None
        keys = []
        for line in res.out.split(NL)[:-1]:
            try:
                keys.append(unescape(line))
            except ValueError as e:
                self.check(False, f"{what}: list: {e}", res)
                return None
        return keys

    def batch(self, d, lines, what, sync=False, final_newline=True):
        text = NL.join(lines) + (NL if final_newline and lines else b"")
        return self.run((["--sync"] if sync else []) + [d, "batch"], input=text)

    def log_path(self, d):
        return os.path.join(d, LOG_NAME)

    def log_size(self, d):
        p = self.log_path(d)
        return os.path.getsize(p) if os.path.exists(p) else None


# ---------------------------------------------------------------------------------------
# An exact model of a store built by put and del: the keys in log order and the log's size
# ---------------------------------------------------------------------------------------

class Model:
    def __init__(self):
        self.items = {}   # key -> value, in the order of their newest records
        self.records = 0
        self.log = HEADER
        self.offsets = {}  # key -> offset of its newest put
        self.ops = []      # every record: (offset, type, key, value)

    def put(self, k, v):
        self.items.pop(k, None)
        self.items[k] = v
        self.offsets[k] = self.log
        self.ops.append((self.log, 1, k, v))
        self.records += 1
        self.log += framed(len(k), len(v))

    def delete(self, k):
        del self.items[k]
        self.offsets.pop(k, None)
        self.ops.append((self.log, 2, k, b""))
        self.records += 1
        self.log += framed(len(k))

    def live_bytes(self):
        return sum(framed(len(k), len(v)) for k, v in self.items.items())


def check_log(t, d, m, what):
    """The log of d, record by record, against the records model m says were written."""
    try:
        recs = parse_log(read(t.log_path(d)))
    except (OSError, ValueError) as e:
        return t.check(False, f"{what}: the log is not as README lays it out: {e}")
    at = next((i for i, (a, b) in enumerate(zip(recs, m.ops)) if a != b),
              min(len(recs), len(m.ops)))
    if not t.check(recs == m.ops, f"{what}: the log holds {len(recs)} records, the commands "
                   f"wrote {len(m.ops)}; first difference at record {at}"):
        for name, rs in (("log  ", recs), ("model", m.ops)):
            shown = [(o, ty, short(k, 30), short(v, 30)) for o, ty, k, v in rs[at:at + 3]]
            print(f"    {name} {shown}")
        return False
    return True


def check_model(t, d, m, what, check_values=True):
    """list, stats, the values and the log of a store built from model m."""
    check_log(t, d, m, what)
    keys = t.list_keys(d, what)
    if keys is not None:
        want = list(m.items)
        at = next((i for i, (a, b) in enumerate(zip(keys, want)) if a != b),
                  min(len(keys), len(want)))
        if not t.check(keys == want, f"{what}: list is not every live key in log order "
                       f"(got {len(keys)} keys, want {len(want)}; first difference at {at})"):
            print(f"    got  {[short(k, 40) for k in keys[at:at + 6]]}\n"
                  f"    want {[short(k, 40) for k in want[at:at + 6]]}")
    st = t.stats(d, what)
    if st:
        live = m.live_bytes()
        size = t.log_size(d)
        for field, want in (("records", m.records), ("live_keys", len(m.items)),
                            ("log_bytes", m.log), ("live_bytes", live),
                            ("dead_bytes", m.log - HEADER - live)):
            t.check(st[field] == want, f"{what}: stats {field} is {st[field]!r}, want {want}",
                    st["_res"])
        t.check(size == m.log, f"{what}: the log has {size} bytes, want {m.log}")
        check_index_stats(t, st, what)
    if check_values and m.items:
        lines = [b"get " + escape(k) for k in m.items]
        res = t.batch(d, lines, f"{what}: batch get")
        want = b"".join(b"VALUE " + escape(v) + NL for v in m.items.values())
        t.check(res.rc == 0 and res.out == want,
                f"{what}: batch get of every key does not give the values put", res)


def check_index_stats(t, st, what):
    """The index's figures against each other (README, "The index"): 4 slots per bucket, 8
    bytes per slot, load = live keys / slots, bytes per key = index bytes / live keys."""
    slots, live, nbytes = st["index_slots"], st["live_keys"], st["index_bytes"]
    load, bpk = st["index_load"], st["bytes_per_key"]
    res = st["_res"]
    t.check(slots > 0 and slots % 4 == 0 and slots >= live,
            f"{what}: index slots {slots} (4 per bucket, at least one per live key)", res)
    t.check(nbytes >= 8 * slots, f"{what}: index bytes {nbytes}, under 8 per slot "
            f"({8 * slots})", res)
    want = live / slots if slots else 0.0
    t.check(abs(load - want) <= st["index_load_tol"],
            f"{what}: index_load {load}, want live keys / slots = {want:.6f}", res)
    want = nbytes / live if live else 0.0
    t.check(abs(bpk - want) <= st["bytes_per_key_tol"],
            f"{what}: bytes_per_key {bpk}, want index bytes / live keys = {want:.4f}", res)


# ---------------------------------------------------------------------------------------
# basic
# ---------------------------------------------------------------------------------------

# Keys given as argument bytes: every kind of awkward byte (no NUL: argv cannot hold one).
ARG_KEYS = [
    b"alice", b"with space", b"two  spaces", b"new\nline", b"\nfirst", b"last\n",
    b"back\\slash", b"\\", b"\\\\x41", b"\\x41", b"tab\there", b"cr\rlf\r\n",
    b"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x90\xa6", b"\xff\xfe\x80 high", b"\x01\x02\x7f",
    b"~!#$%&'()*+,./:;<=>?@[]^_`{|}", b"\"quoted\"", b"x" * 3000, b"0", b"VALUE", b"OK",
    b"get", b"put k v", b"cuckoo-kv:import:fake", b" ", b"\x7f", b"a\x1bb",
]


def test_put_get_del(t, m, d):
    t.section("put, get, del: creation, byte-exact values, exit 3, argument bytes")
    t.check(not os.path.exists(d), "the store's directory exists before the first put")
    res = t.run([d, "put", "alice", "42"])
    if not t.ok(res, "put alice 42 in a new directory"):
        return False
    m.put(b"alice", b"42")
    t.check(os.path.isfile(t.log_path(d)), f"put did not create {LOG_NAME}")
    log = read(t.log_path(d)) if os.path.isfile(t.log_path(d)) else b""
    t.check(log[:8] == b"CUCKOOKV" and int.from_bytes(log[8:12], "little") == 1
            and int.from_bytes(log[12:16], "little") == 0,
            f"the log's header is not CUCKOOKV, version 1, flags 0: {log[:32]!r}")
    t.check(len(log) >= HEADER and le64(log, 24) == xxh3_64(log[:24], 0),
            f"the log's header: bytes 24..31 are not XXH3-64 (seed 0) of bytes 0..23: "
            f"{log[:32]!r}")
    if t.check(len(log) == HEADER + framed(5, 2), f"the log of one put of alice = 42 has "
               f"{len(log)} bytes, want {HEADER + framed(5, 2)}"):
        r = log[HEADER:]
        t.check(r[0] == 1 and r[1:4] == b"\0\0\0" and le32(r, 4) == 5 and le32(r, 8) == 2
                and r[16:23] == b"alice42",
                f"the first record is not a put of alice = 42 as README lays it out (type 1, "
                f"3 zero bytes, lengths 5 and 2, key and value at 16): {r!r}")
        t.check(le32(r, 12) == xxh3_64(r[:12], HEADER) & 0xFFFFFFFF,
                f"the first record's bytes 12..15 are not the low 32 bits of XXH3-64 of bytes "
                f"0..11 seeded with its offset {HEADER}: {r!r}")
        t.check(le64(r, len(r) - 8) == xxh3_64(r[:-8], HEADER),
                f"the first record's last 8 bytes are not XXH3-64 of the rest seeded with its "
                f"offset {HEADER}: {r!r}")
    res = t.run([d, "get", "alice"])
    t.check(res.rc == 0 and res.out == b"42", "get alice: want exactly b'42' (no newline)", res)

    res = t.run([d, "get", "nobody"])
    t.check(res.rc == 3 and res.out == b"", "get of a missing key: want exit 3, no output", res)
    before = t.log_size(d)
    res = t.run([d, "del", "nobody"])
    t.check(res.rc == 3, "del of a missing key: want exit 3", res)
    t.check(t.log_size(d) == before, "del of a missing key appended to the log")

    # Overwrites, a value with newlines, values given as argument bytes.
    for k, v in ((b"bob", b"1"), (b"bob", b"2"), (b"nl", b"two\nlines\n"), (b"sp", b" x "),
                 (b"dash-v", b"-x"), (b"bin", bytes(range(1, 256)))):
        res = t.run([d, "put", k, v])
        if t.ok(res, f"put {k!r}"):
            m.put(k, v)
    for k in (b"bob", b"nl", b"sp", b"dash-v", b"bin"):
        res = t.run([d, "get", k])
        t.check(res.rc == 0 and res.out == m.items[k], f"get {k!r}: want {short(m.items[k], 80)}",
                res)

    for k in ARG_KEYS:
        v = bytes(t.rng.randrange(1, 256) for _ in range(t.rng.randrange(0, 40)))
        res = t.run([d, "put", k, v])
        if t.ok(res, f"put of key {short(k, 60)}"):
            m.put(k, v)
    for k in ARG_KEYS:
        res = t.run([d, "get", k])
        t.check(res.rc == 0 and res.out == m.items.get(k), f"get of key {short(k, 60)}", res)

    # A key that starts with '-' (README: any bytes; options come before DIR).
    res = t.run([d, "put", "-dash-key", "v"])
    if t.check(res.rc == 0, "put -dash-key v: a key starting with '-' refused", res):
        m.put(b"-dash-key", b"v")
        res = t.run([d, "get", "-dash-key"])
        t.check(res.rc == 0 and res.out == b"v", "get -dash-key", res)

    # The longest key, and one byte more.
    big = b"K" * MAX_KEY
    res = t.run([d, "put", big, "long"])
    if t.ok(res, f"put of a {MAX_KEY}-byte key"):
        m.put(big, b"long")
        res = t.run([d, "get", big])
        t.check(res.rc == 0 and res.out == b"long", f"get of the {MAX_KEY}-byte key", res)
    before = read(t.log_path(d))
    res = t.run([d, "put", big + b"K", "x"])
    t.check(res.rc in (1, 2) and t.one_line(res.err),
            f"put of a {MAX_KEY + 1}-byte key: want exit 1 or 2 and one line on stderr", res)
    res2 = t.run([d, "put", "", "x"])
    t.check(res2.rc in (1, 2) and t.one_line(res2.err),
            "put of an empty key: want exit 1 or 2 and one line on stderr", res2)
    t.check(read(t.log_path(d)) == before, "a refused put changed the log")

    # del, then the key is gone; del again: 3.
    for k in (b"alice", b"with space", b"\xff\xfe\x80 high"):
        res = t.run([d, "del", k])
        if t.ok(res, f"del {k!r}"):
            m.delete(k)
        res = t.run([d, "get", k])
        t.check(res.rc == 3 and res.out == b"", f"get {k!r} after del: want exit 3", res)
        res = t.run([d, "del", k])
        t.check(res.rc == 3, f"del {k!r} twice: want exit 3", res)
    res = t.run([d, "put", "alice", "back"])
    if t.ok(res, "put alice after del"):
        m.put(b"alice", b"back")
    return True


def test_put_stdin_sync(t, m, d):
    t.section("put KEY - (standard input), --sync")
    values = [b"", b"\n", b"no newline", b"ends with newline\n", b"\0nul\0bytes\0",
              bytes(range(256)) * 3, bytes(t.rng.getrandbits(8) for _ in range(300_000)),
              b"-"]
    for i, v in enumerate(values):
        k = b"stdin-%d" % i
        res = t.run([d, "put", k, "-"], input=v)
        if t.ok(res, f"put {k.decode()} - with {len(v)} bytes on stdin"):
            m.put(k, v)
        res = t.run([d, "get", k])
        t.check(res.rc == 0 and res.out == v,
                f"get {k.decode()}: not the {len(v)} bytes given on stdin", res)
    # An empty value is a value: get exits 0 with no output.
    res = t.run([d, "get", "stdin-0"])
    t.check(res.rc == 0 and res.out == b"", "get of an empty value: exit 0, no output", res)

    res = t.run(["--sync", d, "put", "synced", "yes"])
    if t.ok(res, "--sync put"):
        m.put(b"synced", b"yes")
    res = t.run(["--sync", d, "put", "synced-stdin", "-"], input=b"from\nstdin")
    if t.ok(res, "--sync put KEY -"):
        m.put(b"synced-stdin", b"from\nstdin")
    res = t.run(["--sync", d, "get", "synced"])
    t.check(res.rc == 0 and res.out == b"yes", "--sync get", res)
    res = t.run(["--sync", d, "del", "synced"])
    if t.ok(res, "--sync del"):
        m.delete(b"synced")
    res = t.run(["--sync", d, "batch"], input=b"put sb 1\nget sb\n")
    t.check(res.rc == 0 and res.out == b"OK\nVALUE 1\n", "--sync batch", res)
    if res.rc == 0:
        m.put(b"sb", b"1")


def test_list_stats(t, m, d):
    t.section("list (escaped, log order) and stats against the model")
    check_model(t, d, m, "store of put/del/put -")
    # Log order: a put moves its key to the end.
    res = t.run([d, "put", "bob", "3"])
    if t.ok(res, "put bob again"):
        m.put(b"bob", b"3")
    keys = t.list_keys(d, "after re-putting bob")
    t.check(keys is not None and keys[-1:] == [b"bob"],
            "list: a key put again is not listed last (log order of newest records)")
    # The exact escaped lines, as bytes.
    res = t.run([d, "list"])
    want = b"".join(escape(k) + NL for k in m.items)
    t.check(res.rc == 0 and res.out == want, "list: output is not the escaped keys, one per "
            "line, in log order", res)
    for k, line in ((b"with space", b"with\\x20space"), (b"new\nline", b"new\\x0aline"),
                    (b"back\\slash", b"back\\\\slash"), (b"\\x41", b"\\\\x41"),
                    (b"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x90\xa6",
                     b"caf\\xc3\\xa9\\x20\\xe2\\x9c\\x93\\x20\\xf0\\x9f\\x90\\xa6"),
                    (b"\x01\x02\x7f", b"\\x01\\x02\\x7f"), (b"tab\there", b"tab\\x09here"),
                    (b"~!#$%&'()*+,./:;<=>?@[]^_`{|}", b"~!#$%&'()*+,./:;<=>?@[]^_`{|}")):
        if k in m.items:
            t.check(NL + line + NL in NL + res.out,
                    f"list: key {k!r} is not printed as {line!r}", res)

    # An empty store: nothing listed, zero live keys, bytes per key 0.
    e = t.path("empty-store")
    em = Model()
    if t.ok(t.run([e, "put", "only", "x"]), "put into a new store"):
        em.put(b"only", b"x")
        if t.ok(t.run([e, "del", "only"]), "del the only key"):
            em.delete(b"only")
        res = t.run([e, "list"])
        t.check(res.rc == 0 and res.out == b"", "list of a store with no live key", res)
        check_model(t, e, em, "store with no live key")


def test_batch(t, m, d):
    t.section("batch: protocol lines, escaping, ERR goes on, exit 0 and 3")
    every = bytes(range(256))
    cases = [  # (input line, expected output line or b"ERR" for any ERR message)
        (b"put b1 v1", b"OK"),
        (b"put b\\x20sp\\x0ace\\\\ val\\x00ue\\x0a", b"OK"),
        (b"put every " + escape(every), b"OK"),
        (b"put " + escape(every[1:]) + b" keyed", b"OK"),
        (b"put empty ", b"OK"),
        (b"get b1", b"VALUE v1"),
        (b"get b\\x20sp\\x0ace\\\\", b"VALUE val\\x00ue\\x0a"),
        (b"get every", b"VALUE " + escape(every)),
        (b"get " + escape(every[1:]), b"VALUE keyed"),
        (b"get empty", b"VALUE "),
        (b"has b1", b"OK"),
        (b"has " + escape(b"new\nline"), b"OK" if b"new\nline" in m.items else b"NOT_FOUND"),
        (b"get " + escape(b"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x90\xa6"),
         b"VALUE " + escape(m.items.get(b"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x90\xa6", b""))),
        (b"put b1 v2", b"OK"),
        (b"get b1", b"VALUE v2"),
        (b"del b1", b"OK"),
        (b"get b1", b"NOT_FOUND"),
        (b"has b1", b"NOT_FOUND"),
        (b"del b1", b"NOT_FOUND"),
        (b"put VALUE OK", b"OK"),
        (b"get VALUE", b"VALUE OK"),
    ]
    # README: words separated by one space, KEY and VALUE escaped, so that neither holds a
    # raw space, control or non-ASCII byte: anything else is a bad line (ERR, nothing done).
    bad = [
        b"frobnicate key", b"get", b"put", b"del", b"has", b"get a b", b"has a b",
        b"get a\\q", b"get a\\x4", b"get a\\", b"get a\\xg0",
        b"get  a", b"put " + b"k" * (MAX_KEY + 1) + b" v",
        b"put bad-k v extra", b"put bad-k v ", b"put bad-k  v", b"put  bad-v", b"get ",
        b"get bad-k ", b"del bad-k ", b"put bad\tk v", b"put bad-k tab\there",
        b"put bad-k v\r", b"get bad-k\r", b"put bad-k caf\xc3\xa9", b"has caf\xc3\xa9",
        b"put bad-k \x01", b"put bad\x7fk v", b"del \x80", b"put bad-k \xff",
        b"put bad-k v\\", b"PUT bad-k v", b"put\tbad-k v",
    ]
    # Bad lines in between: each prints ERR and the batch goes on.
    lines, want = [], []
    bad = t.rng.sample(bad, len(bad))
    bad_at = sorted(t.rng.randrange(len(cases) + 1) for _ in bad)
    bi = 0
    for i, (line, out) in enumerate(cases):
        while bi < len(bad) and bad_at[bi] == i:
            lines.append(bad[bi])
            want.append(b"ERR")
            bi += 1
        lines.append(line)
        want.append(out)
    for b in bad[bi:]:
        lines.append(b)
        want.append(b"ERR")
    before = t.log_size(d)
    res = t.batch(d, lines, "batch")
    got = res.out.split(NL)
    ok = t.check(res.out.endswith(NL) and len(got) - 1 == len(lines),
                 f"batch: {len(got) - 1} output lines for {len(lines)} commands", res)
    if ok:
        for i, (line, w, g) in enumerate(zip(lines, want, got)):
            if w == b"ERR":
                t.check(g.startswith(b"ERR ") and len(g) > 4,
                        f"batch line {i + 1} {short(line, 60)}: want 'ERR <message>', got "
                        f"{short(g, 100)}")
            else:
                t.check(g == w, f"batch line {i + 1} {short(line, 60)}: want {short(w, 100)},"
                        f" got {short(g, 100)}")
    t.check(res.rc == 3, "batch with NOT_FOUND and ERR lines: want exit 3", res)
    # The model: the puts and the del that succeeded.
    for k, v in ((b"b1", b"v1"), (b"b sp\nce\\", b"val\0ue\n"), (b"every", every),
                 (every[1:], b"keyed"), (b"empty", b""), (b"b1", b"v2")):
        m.put(k, v)
    m.delete(b"b1")
    m.put(b"VALUE", b"OK")
    if before is not None:
        t.check(t.log_size(d) == m.log, "batch: the log's size is not that of the records the "
                f"successful commands wrote ({t.log_size(d)} bytes, want {m.log})")

    # What batch put, the other commands see.
    res = t.run([d, "get", "every"])
    t.check(res.rc == 0 and res.out == every, "get of a value batch put from \\xNN escapes", res)
    res = t.run([d, "get", b"b sp\nce\\"])
    t.check(res.rc == 0 and res.out == b"val\0ue\n", "get of a batch-put key with escapes", res)
    res = t.run([d, "get", "empty"])
    t.check(res.rc == 0 and res.out == b"", "get of the empty value batch put", res)

    # All OK: exit 0. Only NOT_FOUND: 3. Only ERR: 3.
    res = t.batch(d, [b"put ok1 1", b"get ok1", b"has ok1", b"del ok1"], "batch")
    t.check(res.rc == 0 and res.out == b"OK\nVALUE 1\nOK\nOK\n",
            "batch of successful commands: want exit 0 and OK/VALUE lines", res)
    m.put(b"ok1", b"1")
    m.delete(b"ok1")
    res = t.batch(d, [b"get ok1", b"get b1"], "batch")
    t.check(res.rc == 3 and res.out == b"NOT_FOUND\nNOT_FOUND\n",
            "batch whose gets find nothing: want NOT_FOUND lines and exit 3", res)
    res = t.batch(d, [b"bogus"], "batch")
    t.check(res.rc == 3 and res.out.startswith(b"ERR ") and res.out.count(NL) == 1,
            "batch with only a bad line: want one ERR line and exit 3", res)
    res = t.batch(d, [], "batch")
    t.check(res.rc == 0 and res.out == b"", "batch with no input: exit 0, no output", res)
    res = t.run([d, "list"])
    t.check(res.rc == 0 and b"bad" not in res.out,
            "a bad batch line (raw space, control or non-ASCII byte) stored a key", res)
    # The last line without a newline is still a command.
    res = t.batch(d, [b"put nonl 1", b"get nonl"], "batch", final_newline=False)
    t.check(res.rc == 0 and res.out == b"OK\nVALUE 1\n",
            "batch whose last line has no newline: want it run", res)
    if res.rc == 0:
        m.put(b"nonl", b"1")
    # Many commands in one batch.
    n = max(100, int(20000 * scale()))
    keys = [b"bulk %d\n" % i for i in range(n)]
    lines = [b"put " + escape(k) + b" " + escape(b"v%d " % i) for i, k in enumerate(keys)]
    lines += [b"get " + escape(k) for k in keys[::7]]
    lines += [b"del " + escape(k) for k in keys[1::2]]
    # From a regular file (README: answers need not be flushed one by one then).
    bulk = t.path("bulk-batch.txt")
    write(bulk, NL.join(lines) + NL)
    with open(bulk, "rb") as f:
        res = t.run([d, "batch"], stdin=f)
    res.stdin_note = f"  < {bulk} ({len(lines)} lines)"
    want = (b"OK\n" * n + b"".join(b"VALUE " + escape(b"v%d " % i) + NL
                                   for i in range(0, n, 7)) + b"OK\n" * len(keys[1::2]))
    t.check(res.rc == 0 and res.out == want, f"batch of {len(lines)} puts, gets and dels", res)
    if res.rc == 0:
        for i, k in enumerate(keys):
            m.put(k, b"v%d " % i)
        for k in keys[1::2]:
            m.delete(k)
    check_model(t, d, m, "after the batches")


def test_batch_pipe(t):
    t.section("batch over a pipe, line by line: each answer before the next command")
    d = t.path("pipe-store")  # none yet: README, batch creates the store
    m = Model()
    keys = [b"p%d" % i for i in range(10)] + [b"sp ace", b"nl\n", b"\\", b"caf\xc3\xa9", b"\0z"]
    value_bytes = b"ab \n\\\0\xff~\x7f"
    n = 150
    status, answered, stdout_rest, err = 0, 0, b"", b""
    p = subprocess.Popen([t.tool, d, "batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=t.dir, bufsize=0)
    try:
        for i in range(n):
            k = t.rng.choice(keys)
            ek = escape(k)
            r = t.rng.random()
            v = None
            if r < 0.35:
                v = bytes(t.rng.choice(value_bytes) for _ in range(t.rng.randrange(0, 30)))
                line, want = b"put " + ek + b" " + escape(v), b"OK"
            elif r < 0.6:
                line = b"get " + ek
                want = b"VALUE " + escape(m.items[k]) if k in m.items else b"NOT_FOUND"
            elif r < 0.72:
                line, want = b"has " + ek, b"OK" if k in m.items else b"NOT_FOUND"
            elif r < 0.88:
                line, want = b"del " + ek, b"OK" if k in m.items else b"NOT_FOUND"
            else:
                line = t.rng.choice([b"put " + ek + b" a b", b"get " + ek + b" x", b"frob " + ek,
                                     b"put " + ek + b" \t", b"get " + ek + b"\xff",
                                     b"put " + ek + b" caf\xc3\xa9"])
                want = b"ERR"
            try:
                p.stdin.write(line + NL)
            except BrokenPipeError:
                t.check(False, f"line-by-line batch: it stopped reading before command {i + 1}")
                break
            got = read_line(p.stdout, ANSWER_TIMEOUT)
            if want == b"ERR":
                ok = got is not None and got.startswith(b"ERR ") and got.endswith(NL)
            else:
                ok = got == want + NL
            gone = "" if p.poll() is None else f" (it exited, status {p.returncode})"
            if not t.check(ok, f"line-by-line batch, command {i + 1} {short(line, 60)}: got "
                           f"{short(got, 100)} within {ANSWER_TIMEOUT} s{gone}, want "
                           f"{short(want, 100)}{'' if want != b'ERR' else ' <message>'} (README:"
                           " each answer is flushed at once when stdin is not a regular file)"):
                break
            answered += 1
            if want in (b"NOT_FOUND", b"ERR"):
                status = 3
            elif line.startswith(b"put "):
                m.put(k, v)
            elif line.startswith(b"del "):
                m.delete(k)
        if answered == n:
            stdout_rest, err = p.communicate(b"", timeout=CALL_TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if answered < n:
        return
    t.check(p.returncode == status and stdout_rest == b"" and err == b"",
            f"line-by-line batch after its input ends: exit {p.returncode}, more output "
            f"{short(stdout_rest, 100)}, stderr {short(err, 200)}; want exit {status}, nothing")
    if t.check(os.path.isfile(t.log_path(d)), "a batch in a new directory did not create the "
               "store (README: batch creates the store)"):
        check_model(t, d, m, "after the line-by-line batch")


def import_checks(t, d, data, name, what, fresh):
    """After importing data under name into d: the manifest and the records' keys."""
    recs = split_records(data)
    dist = distinct(recs)
    keys = t.list_keys(d, what)
    if keys is None:
        return None
    mkey = MANIFEST_PREFIX + name
    t.check(mkey in keys, f"{what}: the manifest key {mkey.decode()} is not listed")
    content = [k for k in keys if not k.startswith(MANIFEST_PREFIX) and HEX_KEY.fullmatch(k)]
    if fresh:
        others = [k for k in keys if k not in content and k != mkey]
        t.check(not others, f"{what}: keys that are neither 32 hex digits nor the manifest: "
                f"{others[:5]!r}")
        t.check(len(content) == len(dist), f"{what}: {len(content)} record keys listed, the "
                f"file has {len(dist)} distinct records")
        lines = [b"get " + k for k in content]
        res = t.batch(d, lines, f"{what}: batch get") if lines else None
        if res is not None:
            want = b"".join(b"VALUE " + escape(r) + NL for r in dist)
            t.check(res.rc == 0 and res.out == want, f"{what}: the record keys, in log order, "
                    "do not hold the file's distinct records in first-occurrence order", res)
    res = t.run([d, "get", mkey])
    if t.ok(res, f"{what}: get of the manifest"):
        t.check(len(res.out) == 16 * len(recs), f"{what}: the manifest has {len(res.out)} bytes,"
                f" want 16 per record = {16 * len(recs)} (kvstore.h)", res)
        if fresh and len(res.out) == 16 * len(recs) and len(content) == len(dist):
            # The manifest's hashes are the keys (in some byte order), record by record.
            key_of = dict(zip(dist, content))
            entries = [res.out[i:i + 16] for i in range(0, len(res.out), 16)]
            as_is = [e.hex().encode() for e in entries]
            reverse = [e[::-1].hex().encode() for e in entries]
            want = [key_of[r] for r in recs]
            t.check(as_is == want or reverse == want, f"{what}: the manifest's 16-byte hashes "
                    "are not the record keys in file order (as stored or byte-reversed)")
    return keys


def test_import_export(t):
    t.section("import and export: records, manifest, --name, -, deleted records")
    d = t.path("imp")
    f1 = t.path("file1.txt")
    long_lines = [b"a" * (MAX_RECORD - 1), b"b" * MAX_RECORD, b"c" * (3 * MAX_RECORD + 7)]
    data1 = (b"alpha\nbeta\nalpha\n\n\r\nline with spaces \\ back\\slash\n\0nul\0\n"
             b"\xff\xfe latin \xe9\n\n" + NL.join(long_lines) + b"\nbeta\n"
             + gen_text(t.rng, 20000, long_lines=False) + b"\nlast line, no newline")
    write(f1, data1)
    recs1 = split_records(data1)
    # The cuts: 64 KiB - 1 + "\n" is one record; 64 KiB + "\n" two; 3 * 64 KiB + 7 four.
    t.check(recs1.count(b"a" * (MAX_RECORD - 1) + NL) == 1 and b"b" * MAX_RECORD in recs1
            and recs1.count(b"c" * MAX_RECORD) == 3 and b"c" * 7 + NL in recs1,
            "test's own record split")
    dist1 = distinct(recs1)
    res = t.run([d, "import", f1])
    if not t.ok(res, "import FILE into a new directory"):
        return
    import_checks(t, d, data1, b"default", "import of file1", fresh=True)
    try:
        recs = parse_log(read(t.log_path(d)))
        t.check([v for _, _, _, v in recs[:-1]] == dist1 and all(ty == 1 for _, ty, _, _ in recs)
                and recs[-1][2] == DEFAULT_MANIFEST,
                "after import: the log is not a put of each distinct record, in file order, "
                "then the manifest")
    except ValueError as e:
        t.check(False, f"after import: the log is not as README lays it out: {e}")
    mf = manifest_framed(b"default", len(recs1))
    log1 = HEADER + sum(framed(32, len(r)) for r in dist1) + mf
    st = t.stats(d, "after import")
    if st:
        for field, want in (("records", len(dist1) + 1), ("live_keys", len(dist1) + 1),
                            ("log_bytes", log1), ("live_bytes", log1 - HEADER),
                            ("dead_bytes", 0)):
            t.check(st[field] == want, f"after import: stats {field} is {st[field]!r}, want "
                    f"{want}", st["_res"])
        check_index_stats(t, st, "after import")

    out1 = t.path("out1.txt")
    res = t.run([d, "export", out1])
    t.check(res.rc == 0 and os.path.isfile(out1) and read(out1) == data1,
            "export FILE is not byte-identical to the imported file", res)
    res = t.run([d, "export", "-"])
    t.check(res.rc == 0 and res.out == data1,
            "export - does not write exactly the imported file to standard output", res)
    write(out1, b"old contents\n")
    res = t.run([d, "export", out1])
    t.check(res.rc == 0 and read(out1) == data1, "export over an existing file", res)

    # The same file again: nothing but the manifest is written.
    before = t.log_size(d)
    res = t.run([d, "import", f1])
    if t.ok(res, "import of the same file again"):
        grew = t.log_size(d) - before
        t.check(grew in (0, mf), f"import of the same file again: the log grew by {grew} bytes;"
                f" only the manifest ({mf} bytes) may be written again")
        st = t.stats(d, "after importing again")
        if st:
            t.check(st["live_keys"] == len(dist1) + 1, f"after importing again: {st['live_keys']}"
                    f" live keys, want {len(dist1) + 1}", st["_res"])

    # --name, import - : a second manifest beside the first.
    data2 = b"beta\nalpha\nnew line here\nbeta\n" + gen_text(t.rng, 5000, long_lines=False)
    res = t.run([d, "import", "-", "--name", "other"], input=data2)
    if t.ok(res, "import - --name other"):
        keys = t.list_keys(d, "after import --name other")
        t.check(keys is not None and MANIFEST_PREFIX + b"other" in keys,
                "import --name other: no key cuckoo-kv:import:other")
        res = t.run([d, "export", "-", "--name", "other"])
        t.check(res.rc == 0 and res.out == data2, "export - --name other", res)
        res = t.run([d, "export", out1])
        t.check(res.rc == 0 and read(out1) == data1,
                "export of the default manifest after importing another name", res)
        res = t.run([d, "get", MANIFEST_PREFIX + b"other"])
        t.check(res.rc == 0 and len(res.out) == 16 * len(split_records(data2)),
                "the manifest of --name other: 16 bytes per record", res)
    data3 = gen_text(t.rng, 30000)
    f3 = t.path("file3.txt")
    write(f3, data3)
    res = t.run(["--sync", d, "import", f3, "--name", "synced"])
    if t.ok(res, "--sync import FILE --name synced"):
        out3 = t.path("out3.txt")
        res = t.run([d, "export", out3, "--name", "synced"])
        t.check(res.rc == 0 and read(out3) == data3, "export --name synced", res)
    # An empty file: an empty manifest, an empty export.
    empty = t.path("empty.txt")
    write(empty, b"")
    res = t.run([d, "import", empty, "--name", "empty"])
    if t.ok(res, "import of an empty file"):
        out_e = t.path("out-empty.txt")
        res = t.run([d, "export", out_e, "--name", "empty"])
        t.check(res.rc == 0 and os.path.isfile(out_e) and read(out_e) == b"",
                "export of an empty import: want an empty file", res)
    # No such manifest (README: an error, 2): no file, nothing on stdout for "-".
    nm = t.path("no-manifest.txt")
    res = t.run([d, "export", nm, "--name", "never-imported"])
    t.error2(res, "export --name of a name never imported", names=["never-imported"])
    t.check(not os.path.exists(nm), "export of a name never imported created its file")
    res = t.run([d, "export", "-", "--name", "never-imported-2"])
    t.error2(res, "export - --name of a name never imported", names=["never-imported-2"])
    plain = t.path("never-imported-store")
    t.ok(t.run([plain, "put", "k", "v"]), "put")
    res = t.run([plain, "export", nm])
    t.error2(res, "export (default name) from a store that never imported", names=["default"])
    t.check(not os.path.exists(nm), "export from a store that never imported created its file")

    # Deleted records: export exits 3, writes the others.
    gone = [b"alpha\n", dist1[len(dist1) // 2]]
    if gone[1] == gone[0]:
        gone = gone[:1]
    content = [k for k in (t.list_keys(d, "before deleting records") or [])
               if HEX_KEY.fullmatch(k)]
    lines = [b"get " + k for k in content]
    res = t.batch(d, lines, "get every record") if lines else None
    key_of = {}
    if res is not None and res.rc == 0:
        for k, line in zip(content, res.out.split(NL)):
            if line.startswith(b"VALUE "):
                key_of[unescape(line[6:])] = k
    if t.check(all(g in key_of for g in gone), "records of file1 not found by batch get"):
        for g in gone:
            t.ok(t.run([d, "del", key_of[g]]), f"del of the key of record {g[:30]!r}")
        want = b"".join(r for r in recs1 if r not in gone)
        res = t.run([d, "export", out1])
        t.check(res.rc == 3, "export with deleted records: want exit 3", res)
        t.check(read(out1) == want, "export with deleted records: the file is not the other "
                f"records in order ({os.path.getsize(out1)} bytes, want {len(want)})")
        res = t.run([d, "export", "-"])
        t.check(res.rc == 3 and res.out == want,
                "export - with deleted records: want exit 3 and the other records", res)
        # Put back: the export is whole again.
        for g in gone:
            t.ok(t.run([d, "put", key_of[g], "-"], input=g), "put back a deleted record")
        res = t.run([d, "export", out1])
        t.check(res.rc == 0 and read(out1) == data1, "export after putting the records back",
                res)

    # Unwritable destinations: exit 2, one line naming the path, nothing left behind.
    regular = t.path("regular-file")
    write(regular, b"not a directory\n")
    target_dir = t.path("exports", "is-a-directory")
    os.makedirs(target_dir)
    for dest, label in ((t.path("no-such-dir", "x.txt"), "a missing directory"),
                        (os.path.join(regular, "x.txt"), "a regular file as directory"),
                        (target_dir, "an existing directory")):
        before = sorted(os.listdir(t.path("exports")))
        res = t.run([d, "export", dest])
        t.error2(res, f"export to {label}", names=[dest])
        t.check(sorted(os.listdir(t.path("exports"))) == before,
                f"export to {label}: files left behind")
    t.check(read(regular) == b"not a directory\n", "export changed a regular file")
    t.check(not os.path.exists(t.path("no-such-dir")), "export created a missing directory")

    # Unreadable import sources.
    for src, label in ((t.path("no-such-file.txt"), "a missing file"),
                       (t.path("exports"), "a directory")):
        before = t.log_size(d)
        res = t.run([d, "import", src, "--name", "bad"])
        t.error2(res, f"import of {label}", names=[src], stdout_empty=False)
        keys = t.list_keys(d, f"after importing {label}")
        t.check(keys is not None and MANIFEST_PREFIX + b"bad" not in keys,
                f"a failed import of {label} left a manifest")


def test_compact(t):
    t.section("compact: every value kept, in order; dead bytes 0")
    d = t.path("compact")
    m = Model()
    # The store first (README: put and import create one), then a batch on it.
    if not t.ok(t.run([d, "put", "first", "x"]), "put"):
        return
    m.put(b"first", b"x")
    lines = [b"del first"]
    m.delete(b"first")
    keys = [b"c%d\n%s" % (i, b" " * (i % 3)) for i in range(300)]
    for i, k in enumerate(keys):
        v = bytes(t.rng.getrandbits(8) for _ in range(t.rng.randrange(0, 300)))
        lines.append(b"put " + escape(k) + b" " + escape(v))
        m.put(k, v)
    for k in t.rng.sample(keys, 120):
        v = b"overwritten %s" % k
        lines.append(b"put " + escape(k) + b" " + escape(v))
        m.put(k, v)
    for k in t.rng.sample(keys, 100):
        lines.append(b"del " + escape(k))
        m.delete(k)
    res = t.run([d, "batch"], input=NL.join(lines) + NL)
    if not t.ok(res, "batch of puts, overwrites and dels"):
        return
    check_model(t, d, m, "before compact")
    data = gen_text(t.rng, 200_000)
    f = t.path("compact-in.txt")
    write(f, data)
    t.ok(t.run([d, "import", f]), "import")
    res = t.run([d, "list"])
    list_before = res.out
    st = t.stats(d, "before compact")
    t.check(st is not None and st["dead_bytes"] and st["dead_bytes"] > 0,
            "before compact: no dead bytes", st and st["_res"])
    keys = t.list_keys(d, "before compact") or []
    res = t.batch(d, [b"get " + escape(k) for k in keys], "get all")
    values_before = res.out
    res = t.run([d, "compact"])
    if not t.ok(res, "compact"):
        return
    try:
        recs = parse_log(read(t.log_path(d)))
        t.check([(ty, k) for _, ty, k, _ in recs] == [(1, k) for k in keys],
                f"after compact: the log's {len(recs)} records are not one put per live key "
                f"({len(keys)}), in the order listed before")
    except ValueError as e:
        t.check(False, f"after compact: the log is not as README lays it out (each record "
                f"sealed for its new offset?): {e}")
    t.check(not os.path.exists(os.path.join(d, COMPACT_NAME)),
            f"compact left {COMPACT_NAME} behind")
    res = t.run([d, "list"])
    t.check(res.rc == 0 and res.out == list_before,
            "compact changed the live keys or their order", res)
    res = t.batch(d, [b"get " + escape(k) for k in keys], "get all")
    t.check(res.rc == 0 and res.out == values_before, "compact changed values", res)
    st2 = t.stats(d, "after compact")
    if st and st2:
        t.check(st2["dead_bytes"] == 0, f"after compact: dead bytes {st2['dead_bytes']}",
                st2["_res"])
        for field in ("live_keys", "live_bytes"):
            t.check(st2[field] == st[field], f"compact changed {field}: {st[field]} -> "
                    f"{st2[field]}", st2["_res"])
        t.check(st2["records"] == st2["live_keys"],
                f"after compact: {st2['records']} records for {st2['live_keys']} live keys",
                st2["_res"])
        t.check(st2["log_bytes"] == HEADER + st2["live_bytes"] == t.log_size(d),
                f"after compact: log {st2['log_bytes']} bytes, file {t.log_size(d)}, want "
                f"header + live = {HEADER + (st2['live_bytes'] or 0)}", st2["_res"])
    out = t.path("compact-out.txt")
    res = t.run([d, "export", out])
    t.check(res.rc == 0 and read(out) == data, "export after compact", res)
    # Compact again (nothing dead), with --sync; and the store keeps working.
    size = t.log_size(d)
    t.ok(t.run(["--sync", d, "compact"]), "--sync compact of a compact log")
    t.check(t.log_size(d) == size, "a second compact changed the log's size")
    res = t.run([d, "put", "after-compact", "1"])
    t.ok(res, "put after compact")
    res = t.run([d, "get", "after-compact"])
    t.check(res.rc == 0 and res.out == b"1", "get after compact", res)


def test_usage_errors(t):
    t.section("bad command lines: exit 1, one line on stderr, nothing created or written")
    d = t.path("never-created")
    f = t.path("usage-in.txt")
    write(f, b"a\nb\n")
    out = t.path("usage-out.txt")
    cases = [
        [], [d], [d, "frobnicate"], [d, "frobnicate", "x"], [d, "put"], [d, "put", "k"],
        [d, "put", "k", "v", "extra"], [d, "get"], [d, "get", "a", "b"], [d, "del"],
        [d, "del", "a", "b"], [d, "list", "x"], [d, "stats", "x"], [d, "import"],
        [d, "import", f, "--name"], [d, "import", f, "--bogus"], [d, "import", f, "extra"],
        [d, "export"], [d, "export", out, "--name"], [d, "export", out, "--frob", "x"],
        [d, "compact", "x"], [d, "batch", "x"], ["--bogus", d, "get", "k"], ["--sync"],
        ["--sync", d], [d, "GET", "k"],
    ]
    for args in cases:
        res = t.run(args, input=b"put a 1\n")
        t.usage_error(res, "cuckoo-kv " + " ".join(argtext(a) for a in args))
        t.check(not os.path.exists(d), f"{args}: a bad command line created the store")
        t.check(not os.path.exists(out), f"{args}: a bad command line created {out}")
    # Against an existing store: the log is unchanged.
    s = t.path("usage-store")
    t.ok(t.run([s, "put", "k", "v"]), "put")
    before = read(t.log_path(s))
    for args in ([s, "put", "k"], [s, "put", "k", "v", "w"], [s, "del"], [s, "import", f, "-x"],
                 [s, "frob"], [s, "batch", "extra"]):
        res = t.run(args, input=b"put b 2\n")
        t.usage_error(res, "cuckoo-kv " + " ".join(argtext(a) for a in args))
    t.check(read(t.log_path(s)) == before, "bad command lines changed the log")


def test_no_store(t):
    t.section("no store: exit 2, one line naming the directory, nothing created")
    missing = t.path("missing-store")
    out = t.path("ns-out.txt")
    for args in (["get", "k"], ["del", "k"], ["list"], ["stats"], ["export", out],
                 ["compact"]):
        res = t.run([missing] + args)
        t.error2(res, f"{args[0]} on a missing directory", names=[missing])
        t.check(not os.path.exists(missing), f"{args[0]} created a store")
    t.check(not os.path.exists(out), "export from a missing store created its file")
    # README: batch creates the store, as put and import do.
    res = t.run([missing, "batch"], input=b"put k v\nget k\n")
    t.check(res.rc == 0 and res.out == b"OK\nVALUE v\n" and os.path.isfile(t.log_path(missing)),
            "batch in a missing directory: want the store created, OK, VALUE v and exit 0", res)
    bm = Model()
    bm.put(b"k", b"v")
    check_model(t, missing, bm, "store a batch created")
    shutil.rmtree(missing, ignore_errors=True)
    res = t.run([missing, "batch"], input=b"get k\n")
    t.check(res.rc == 3 and res.out == b"NOT_FOUND\n" and os.path.isfile(t.log_path(missing)),
            "batch of a get in a missing directory: want the store created, NOT_FOUND, exit 3",
            res)
    check_model(t, missing, Model(), "empty store a batch created")
    shutil.rmtree(missing, ignore_errors=True)

    empty_dir = t.path("not-a-store")
    os.mkdir(empty_dir)
    for args in (["get", "k"], ["list"], ["stats"], ["del", "k"]):
        res = t.run([empty_dir] + args)
        t.error2(res, f"{args[0]} on a directory that is not a store", names=[empty_dir])
    t.check(os.listdir(empty_dir) == [], "get on a directory that is not a store created files")

    regular = t.path("regular-dir-arg")
    write(regular, b"x\n")
    for args in (["get", "k"], ["put", "k", "v"], ["batch"], ["import", "-"]):
        res = t.run([regular] + args, input=b"put k v\n")
        t.error2(res, f"{args[0]} with a regular file as DIR", names=[regular])
    t.check(read(regular) == b"x\n", "a regular file given as DIR was changed")
    under = os.path.join(regular, "sub")
    res = t.run([under, "put", "k", "v"])
    t.error2(res, "put into a directory under a regular file", names=[under])

    garbage = t.path("garbage-store")
    os.mkdir(garbage)
    junk = bytes(random.Random(7).getrandbits(8) for _ in range(200))
    write(os.path.join(garbage, LOG_NAME), junk)
    for args in (["get", "k"], ["put", "k", "v"], ["import", "-"]):
        res = t.run([garbage] + args, input=b"x\n")
        t.error2(res, f"{args[0]} on a store whose log is not a log", names=[LOG_NAME],
                 stdout_empty=False)
    t.check(read(os.path.join(garbage, LOG_NAME)) == junk, "a foreign log file was changed")


def build_store(t, d, n=8):
    """A store of n puts of known sizes, its model and the records' offsets."""
    m = Model()
    offs = []
    for i in range(n):
        k = b"key-%d" % i
        v = b"value %d " % i + b"=" * t.rng.randrange(20, 60)
        offs.append(m.log)
        res = t.run([d, "put", k, v])
        if not t.ok(res, f"put {k.decode()}"):
            return None, None
        m.put(k, v)
    return m, offs


def test_damage(t):
    t.section("a damaged log: exit 2 with the log and the offset; torn last records cut off")
    base = t.path("damage-base")
    m, offs = build_store(t, base, 8)
    if m is None:
        return
    orig = read(t.log_path(base))
    t.check(len(orig) == m.log, f"the log of 8 puts has {len(orig)} bytes, want {m.log}")
    check_log(t, base, m, "the log of 8 puts")
    sizes = [framed(len(k), len(v)) for k, v in m.items.items()]
    vals = list(m.items.values())
    last = offs[7]

    def fresh(name):
        d = t.path(name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(base, d)
        return d

    def flip(data, pos, value=None):
        """data with the byte at pos set to value, or one random bit of it flipped."""
        b = bytearray(data)
        b[pos] = (b[pos] ^ (1 << t.rng.randrange(8))) if value is None else value
        return bytes(b)

    def past_end(data, off):
        """Whether the lengths in the header at off make the record run past the end."""
        return off + FRAME + le32(data, off + 4) + le32(data, off + 8) > len(data)

    def mid():
        return t.rng.randrange(1, 7)  # records 1..6 are in the middle (not last)

    # Any byte of a record in the middle: its checksum or its header check catches it.
    variants = []
    i = mid()
    variants.append(("a flipped value byte", offs[i],
                     flip(orig, offs[i] + REC_HEAD + 5 + t.rng.randrange(len(vals[i])))))
    i = mid()
    variants.append(("a flipped checksum byte", offs[i],
                     flip(orig, offs[i] + sizes[i] - 1 - t.rng.randrange(8))))
    i = mid()
    variants.append(("a flipped key byte", offs[i], flip(orig, offs[i] + REC_HEAD
                                                            + t.rng.randrange(5))))
    i = mid()
    variants.append(("a flipped header check byte", offs[i],
                     flip(orig, offs[i] + HEAD_CHECKED + t.rng.randrange(4))))
    i = mid()
    variants.append(("type 7", offs[i], flip(orig, offs[i], 7)))
    i = mid()
    variants.append(("a nonzero reserved byte", offs[i], flip(orig, offs[i] + 1
                                                                 + t.rng.randrange(3), 1)))
    variants.append(("the first record's checksum", offs[0], flip(orig, offs[0] + sizes[0] - 3)))
    for _ in range(4):
        pos = t.rng.randrange(offs[1], offs[7])
        rec = max(i for i in range(8) if offs[i] <= pos)
        variants.append((f"a byte flipped at {pos} (byte {pos - offs[rec]} of record {rec})",
                         offs[rec], flip(orig, pos)))
    # A length flipped so that the record runs past the end of the file: without the header
    # check that would look like a torn last record, and the records after it would be cut.
    for field, at, bits in (("key", 5, (2, 8)), ("value", 9, (2, 8)), ("value", 10, (0, 8))):
        i = mid()
        data = flip(orig, offs[i] + at, orig[offs[i] + at] ^ (1 << t.rng.randrange(*bits)))
        if t.check(past_end(data, offs[i]), f"test's own damage: record {i}'s {field} length "
                   "does not point past the end"):
            variants.append((f"a bit of the {field} length flipped, pointing past the end of "
                             "the file", offs[i], data))
    i = mid()
    variants.append(("a key length one more", offs[i], flip(orig, offs[i] + 4, 6)))
    # Headers that pass their check (recomputed here) but say what no writer writes, or
    # lengths that do not fit the record's checksum.
    i = mid()
    sealed = [
        ("a value length one short", flip(orig, offs[i] + 8, len(vals[i]) - 1)),
        ("a value length one more", flip(orig, offs[i] + 8, len(vals[i]) + 1)),
        ("a key length one short", flip(orig, offs[i] + 4, 4)),
        ("key length 0", orig[:offs[i] + 4] + b"\0\0\0\0" + orig[offs[i] + 8:]),
        ("a key length over 64 KiB", flip(orig, offs[i] + 6, 0x10)),
        ("a value length over 2^30", flip(orig, offs[i] + 11, 0x40)),
        ("a delete with a value", flip(orig, offs[i], 2)),
        ("type 0", flip(orig, offs[i], 0)),
        ("type 7", flip(orig, offs[i], 7)),
        ("a nonzero reserved byte", flip(orig, offs[i] + 3, 0x80)),
    ]
    for label, data in sealed:
        variants.append((f"{label}, its header check recomputed", offs[i],
                         reseal_head(data, offs[i])))
    # Records moved: both checks are seeded with the record's offset.
    i = t.rng.randrange(1, 6)
    variants.append((f"records {i} and {i + 1} swapped", offs[i],
                     orig[:offs[i]] + orig[offs[i + 1]:offs[i + 2]] + orig[offs[i]:offs[i + 1]]
                     + orig[offs[i + 2]:]))
    i = mid()
    variants.append((f"record {i} zeroed", offs[i],
                     orig[:offs[i]] + bytes(sizes[i]) + orig[offs[i + 1]:]))
    # The last record: a damaged header is damage, unless everything from it to the end is
    # zero (README: the header check tells a tear from damage).
    variants += [
        ("the last record's header flipped", last, flip(orig, last + t.rng.randrange(REC_HEAD))),
        ("the last record's header zeroed", last, orig[:last] + bytes(REC_HEAD)
         + orig[last + REC_HEAD:]),
        ("a flipped header of the last record, then zeros", last,
         orig[:last] + flip(orig[last:last + REC_HEAD], t.rng.randrange(REC_HEAD))
         + bytes(sizes[7] - REC_HEAD)),
        ("record 6 copied in place of the last one", last, orig[:last] + orig[offs[6]:last]),
        ("the last record's value length one short, its header check recomputed", last,
         reseal_head(flip(orig, last + 8, len(vals[7]) - 1), last)),
    ]
    data = flip(orig, last + 5, orig[last + 5] ^ (1 << t.rng.randrange(2, 8)))
    if t.check(past_end(data, last), "test's own damage: the last record's key length does "
               "not point past the end"):
        variants.append(("a bit of the last record's key length flipped, pointing past the "
                         "end of the file", last, data))
    for label, off, data in variants:
        d = fresh("damaged")
        write(t.log_path(d), data)
        for args in (["get", "key-0"], ["stats"], ["put", "new", "x"]):
            res = t.run([d] + args)
            if t.error2(res, f"{args[0]} on a log with {label} in record at offset {off}",
                        names=[LOG_NAME]):
                t.check(off in numbers_in(res.err), f"{args[0]} on a log with {label}: the "
                        f"message does not give the bad record's offset {off}", res)
        t.check(read(t.log_path(d)) == data, f"a refused log with {label} was changed")
    for label, data in (("a bad magic", flip(orig, 3)), ("a bad header checksum",
                                                         flip(orig, 27)),
                        ("version 2", flip(orig, 8, 2))):
        d = fresh("damaged")
        write(t.log_path(d), data)
        res = t.run([d, "get", "key-0"])
        t.error2(res, f"get on a log with {label}", names=[LOG_NAME])
        t.check(read(t.log_path(d)) == data, f"a refused log with {label} was changed")

    # Torn last records: left out, the store opens; reads leave the log as it is, and the
    # first write moves the tail's bytes to cuckoo-kv.log.torn-OFFSET before cutting it.
    keep = [b"key-%d" % i for i in range(7)]
    torn = [
        ("the last record cut inside its header", orig[:last + t.rng.randrange(1, REC_HEAD)]),
        ("the last record cut after its header", orig[:last + REC_HEAD]),
        ("the last record cut short", orig[:last + t.rng.randrange(REC_HEAD + 1, sizes[7])]),
        ("the last record without its last byte", orig[:-1]),
        ("the last record failing its checksum", flip(orig, last + REC_HEAD + 5 + 3)),
        ("the last record's checksum flipped", flip(orig, len(orig) - 1 - t.rng.randrange(8))),
        ("the last record's key and value zeroed (a good header, then zeros)",
         orig[:last + REC_HEAD] + bytes(sizes[7] - REC_HEAD)),
        ("the last record zeroed", orig[:last] + bytes(sizes[7])),
        ("the last record zeroed, and more zeros", orig[:last]
         + bytes(sizes[7] + t.rng.randrange(1, 300))),
        ("zeros where the last record was, fewer than a header", orig[:last]
         + bytes(t.rng.randrange(1, REC_HEAD))),
    ]
    for label, data in torn:
        d = fresh("torn")
        write(t.log_path(d), data)
        st = t.stats(d, label)
        if st is None:
            continue
        t.check(st["truncated"] == len(data) - last and st["torn_offset"] == last,
                f"{label}: stats truncated {st['truncated']} at {st['torn_offset']}, want "
                f"{len(data) - last} at {last}", st["_res"])
        t.check(st["live_keys"] == 7 and st["records"] == 7,
                f"{label}: {st['live_keys']} live keys, {st['records']} records; want 7, 7",
                st["_res"])
        res = t.run([d, "get", "key-7"])
        t.check(res.rc == 3, f"{label}: the torn record's key is still there", res)
        t.check(b"torn tail of %d bytes" % (len(data) - last) in res.err
                and b"left in the log" in res.err, f"{label}: get does not tell of the tail", res)
        res = t.run([d, "list"])
        t.check(read(t.log_path(d)) == data and os.listdir(d) == [LOG_NAME],
                f"{label}: reading commands changed the store's directory", res)
        res = t.batch(d, [b"get " + k for k in keep], "get")
        t.check(res.rc == 0 and res.out == b"".join(b"VALUE " + escape(m.items[k]) + NL
                                                   for k in keep),
                f"{label}: the records before the torn one changed", res)
        t.check(read(t.log_path(d)) == data, f"{label}: a batch of gets changed the log", res)
        res = t.run([d, "put", "key-7", "again"])
        torn_name = f"{LOG_NAME}.torn-{last}"
        t.check(res.rc == 0 and os.path.exists(os.path.join(d, torn_name))
                and read(os.path.join(d, torn_name)) == data[last:],
                f"{label}: the first write did not keep the tail in {torn_name}", res)
        t.check(torn_name.encode() in res.err and b"cut a torn tail" in res.err,
                f"{label}: the write does not say where the tail went", res)
        if t.check(res.rc == 0 and t.log_size(d) == last + framed(5, 5),
                   f"{label}: put after the cut does not append at the cut", res):
            tm = Model()
            for k in keep:
                tm.put(k, m.items[k])
            tm.put(b"key-7", b"again")
            check_log(t, d, tm, f"{label}, then a put")
    for n in (1, 7, REC_HEAD, t.rng.randrange(20, 5000)):
        d = fresh("zeros")
        write(t.log_path(d), orig + b"\0" * n)
        st = t.stats(d, f"{n} trailing zero bytes")
        if st is None:
            continue
        t.check(t.log_size(d) == len(orig) + n, f"{n} trailing zero bytes: stats changed the "
                f"log ({t.log_size(d)} bytes, want {len(orig) + n})")
        res = t.run([d, "recover"])
        t.check(res.rc == 0 and t.log_size(d) == len(orig)
                and read(os.path.join(d, f"{LOG_NAME}.torn-{len(orig)}")) == bytes(n),
                f"{n} trailing zero bytes: recover did not move them aside", res)
        res = t.run([d, "recover"])
        t.check(res.rc == 0 and b"nothing to recover" in res.out,
                f"{n} trailing zero bytes: a second recover", res)
        t.check(st["live_keys"] == 8 and st["truncated"] == n,
                f"{n} trailing zero bytes: live keys {st['live_keys']}, truncated "
                f"{st['truncated']}; want 8 and {n}", st["_res"])
    # A last record failing its checksum, then zero bytes: README's "followed by nothing but
    # zero bytes" may or may not cover it. Either it is cut, or refused as damage.
    label = "the last record failing its checksum, then zero bytes"
    data = flip(orig, last + REC_HEAD + 5 + 3) + bytes(t.rng.randrange(1, 100))
    d = fresh("torn")
    write(t.log_path(d), data)
    res = t.run([d, "stats"])
    if res.rc == 0:
        t.check(b"truncated: %d" % (len(data) - last) in res.out and read(t.log_path(d)) == data,
                f"{label}: opened, but not with the torn record and the zeros left out, or the "
                "log was changed", res)
    elif t.error2(res, f"{label}: neither cut off nor refused", names=[LOG_NAME]):
        t.check(last in numbers_in(res.err) and read(t.log_path(d)) == data,
                f"{label}: refused, but without the offset {last} or with the log changed", res)
        t.note(f"{label}: refused as damage (README's \"followed by nothing but zero bytes\" "
               "may be read either way)")


def read_line(stream, timeout):
    """One line from a raw pipe, or None after timeout seconds."""
    buf = b""
    end = time.monotonic() + timeout
    fd = stream.fileno()
    while not buf.endswith(NL):
        left = end - time.monotonic()
        if left <= 0:
            return None
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            return None
        c = os.read(fd, 1)
        if not c:
            return buf or None
        buf += c
    return buf


def wait_open(t, p, d, timeout=60):
    """Waits until process p has the store's log open and is idle (blocked reading its
    input): it holds the store. Without /proc, waits 3 s."""
    fd_dir = f"/proc/{p.pid}/fd"
    if not os.path.isdir(fd_dir):
        time.sleep(3)
        return True
    log = os.path.realpath(t.log_path(d))
    start = time.monotonic()
    end = start + timeout
    while time.monotonic() < end and p.poll() is None:
        try:
            fds = [os.readlink(os.path.join(fd_dir, n)) for n in os.listdir(fd_dir)]
            with open(f"/proc/{p.pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            fds, state = [], "?"
        # Blocked with the log open; or blocked for 2 s (a tool that opens the log per
        # command).
        if state == "S" and (log in fds or time.monotonic() - start > 2):
            time.sleep(0.2)
            return True
        time.sleep(0.02)
    return False


def test_in_use(t):
    t.section("a store in use: exit 2 'in use'; a damaged log stops a batch with exit 2")
    d = t.path("busy")
    t.ok(t.run([d, "put", "x", "1"]), "put")
    p = subprocess.Popen([t.tool, d, "batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=t.dir, bufsize=0)
    try:
        p.stdin.write(b"has x\n")
        p.stdin.flush()
        t.check(wait_open(t, p, d), "batch did not open the store (or exited)")
        first = read_line(p.stdout, ANSWER_TIMEOUT)
        t.check(first == b"OK\n", f"batch `has x` over a pipe: {first!r} within "
                f"{ANSWER_TIMEOUT} s, want OK (README: answers flushed at once)")
        before = read(t.log_path(d))
        for args in (["get", "x"], ["put", "y", "2"], ["stats"], ["compact"]):
            res = t.run([d] + args)
            if t.error2(res, f"{args[0]} while a batch holds the store"):
                t.check(b"in use" in res.err.lower(),
                        f"{args[0]} while a batch holds the store: the message does not say "
                        "'in use'", res)
        t.check(read(t.log_path(d)) == before, "a refused command changed the log")
        out, err = p.communicate(b"get x\nput z 3\n", timeout=CALL_TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    t.check(p.returncode == 0 and (first or b"") + out == b"OK\nVALUE 1\nOK\n",
            f"the holding batch: exit {p.returncode}, output {(first or b'') + out!r}, "
            f"stderr {err[:300]!r}; want 0 and OK, VALUE 1, OK")
    res = t.run([d, "get", "y"])
    t.check(res.rc == 3, "the put refused as 'in use' happened after all", res)
    res = t.run([d, "get", "z"])
    t.check(res.rc == 0 and res.out == b"3", "the store is free again after the batch", res)

    # A record damaged under a running batch: get reads it, fails its checksum, exit 2.
    d2 = t.path("damaged-under-batch")
    m, offs = build_store(t, d2, 4)
    if m is None:
        return
    p = subprocess.Popen([t.tool, d2, "batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=t.dir, bufsize=0)
    try:
        p.stdin.write(b"has key-1\n")
        p.stdin.flush()
        if not t.check(wait_open(t, p, d2), "batch did not open the store (or exited)"):
            return
        size = t.log_size(d2)
        with open(t.log_path(d2), "r+b") as f:
            f.seek(offs[1] + REC_HEAD + 5 + 2)
            c = f.read(1)
            f.seek(offs[1] + REC_HEAD + 5 + 2)
            f.write(bytes([c[0] ^ 0x55]))
        out, err = p.communicate(b"get key-1\nput after-damage 1\nget key-0\n",
                                 timeout=CALL_TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    t.check(p.returncode == 2 and t.one_line(err),
            f"batch `get` of a record damaged since the open: exit {p.returncode}, stderr "
            f"{err[:300]!r}; want 2 and one line")
    t.check(b"VALUE" not in out, f"batch output damaged data: {out[:200]!r}")
    t.check(t.log_size(d2) == size, "the batch went on after the damaged record (the log grew)")


def group_basic(t):
    d = t.path("store")
    m = Model()
    if test_put_get_del(t, m, d):
        test_put_stdin_sync(t, m, d)
        test_list_stats(t, m, d)
        test_batch(t, m, d)
    test_batch_pipe(t)
    test_import_export(t)
    test_compact(t)
    test_usage_errors(t)
    test_no_store(t)
    test_damage(t)
    test_in_use(t)


# ---------------------------------------------------------------------------------------
# roundtrip: 50 MB imported, half the records fetched, deleted, put back, exported
# ---------------------------------------------------------------------------------------

class Timer:
    def __init__(self):
        self.rows = []

    def __call__(self, label):
        timer = self

        class Ctx:
            def __enter__(self):
                self.start = time.monotonic()

            def __exit__(self, *exc):
                s = time.monotonic() - self.start
                timer.rows.append((label, s))
                print(f"   [{label}: {s:.2f} s]", flush=True)
        return Ctx()


def group_roundtrip(t):
    timer = Timer()
    target = max(200_000, int(50 * 2 ** 20 * scale()))
    src = t.path("big.txt")
    with timer("generate the file"):
        data = gen_text(t.rng, target)
        write(src, data)
        recs = split_records(data)
        dist = distinct(recs)
    print(f"file: {len(data)} bytes, {data.count(NL) + 1} lines, {len(recs)} records, "
          f"{len(dist)} distinct, sha256 {sha(data)}...", flush=True)
    if scale() >= 1:
        t.check(len(data) >= 50 * 2 ** 20, f"the file has {len(data)} bytes, under 50 MiB")
    t.check(not data.endswith(NL) and b"\n\n" in data and len(dist) < len(recs)
            and any(len(r) == MAX_RECORD for r in recs), "test's own file lacks empty lines, "
            "repeats, a cut long line or an unterminated last line")
    d = t.path("store")
    with timer("import"):
        res = t.run([d, "import", src])
    if not t.ok(res, "import of the big file"):
        return
    st = t.stats(d, "after import")
    live0 = len(dist) + 1
    if st:
        t.check(st["live_keys"] == live0, f"after import: {st['live_keys']} live keys, want "
                f"{len(dist)} records + the manifest = {live0}", st["_res"])
        check_index_stats(t, st, "after import")
    with timer("list"):
        keys = t.list_keys(d, "after import")
    if keys is None:
        return
    content = [k for k in keys if k != DEFAULT_MANIFEST]
    t.check(len(content) == len(keys) - 1, "list does not hold the manifest key once")
    bad = [k for k in content if not HEX_KEY.fullmatch(k)]
    t.check(not bad, f"keys that are not 32 lowercase hex digits: {bad[:3]!r}")
    t.check(len(content) == len(dist) and len(set(content)) == len(content),
            f"list: {len(content)} record keys ({len(set(content))} distinct) for "
            f"{len(dist)} distinct records")

    # One batch: get every other key (values saved) and delete it.
    half = content[0::2]
    lines = []
    for k in half:
        ek = escape(k)
        lines.append(b"get " + ek)
        lines.append(b"del " + ek)
    with timer(f"batch get + del of {len(half)} keys"):
        res = t.batch(d, lines, "get and del")
    del lines
    if not t.ok(res, "the get-and-del batch"):
        return
    outl = res.out.split(NL)
    if not t.check(len(outl) == 2 * len(half) + 1 and outl[-1] == b"",
                   f"get-and-del batch: {len(outl) - 1} lines for {2 * len(half)} commands",
                   res):
        return
    saved = []
    with timer("unescape the values"):
        for i in range(len(half)):
            g, dl = outl[2 * i], outl[2 * i + 1]
            if not (g.startswith(b"VALUE ") and dl == b"OK"):
                t.check(False, f"get-and-del batch, key {half[i].decode()}: {short(g, 100)} /"
                        f" {short(dl, 40)}; want VALUE ... / OK")
                return
            try:
                saved.append(unescape(g[6:]))
            except ValueError as e:
                t.check(False, f"get-and-del batch, key {half[i].decode()}: {e}")
                return
    del outl, res
    # list is in log order: a fresh import stores the distinct records in file order.
    want = dist[0::2]
    if not t.check(saved == want, "the values fetched are not the file's distinct records "
                   "(in first-occurrence order, every other one)"):
        diff = next(i for i, (a, b) in enumerate(zip(saved + [None], want + [None])) if a != b)
        got_d = saved[diff] if diff < len(saved) else None
        want_d = want[diff] if diff < len(want) else None
        print(f"    {len(saved)} values, {len(want)} expected; first difference at {diff}: "
              f"got {short(got_d, 80)}, want {short(want_d, 80)}")
    t.check(set(saved) <= set(dist), "values fetched that are no record of the file")
    st = t.stats(d, "after the deletes")
    if st:
        t.check(st["live_keys"] == live0 - len(half), f"after deleting {len(half)} keys: "
                f"{st['live_keys']} live keys, want {live0 - len(half)}", st["_res"])
        t.check(st["dead_bytes"] > 0, "after the deletes: no dead bytes", st["_res"])

    mid = t.path("while-deleted.txt")
    with timer("export with half the records deleted"):
        res = t.run([d, "export", mid])
    t.check(res.rc == 3, "export with deleted records: want exit 3", res)
    if os.path.exists(mid):
        gone = set(saved)
        expect = hashlib.sha256()
        n = 0
        for r in recs:
            if r not in gone:
                expect.update(r)
                n += len(r)
        got = read(mid)
        t.check(len(got) < len(data), f"export with deleted records is not smaller: "
                f"{len(got)} bytes, the file {len(data)}")
        t.check(len(got) == n and hashlib.sha256(got).digest() == expect.digest(),
                f"export with deleted records: {len(got)} bytes (sha {sha(got)}), want the "
                f"{n} bytes of the records not deleted, in order")
        del got
        os.unlink(mid)
    else:
        t.check(False, "export with deleted records wrote no file")

    # One batch: put them back, escaped per README.
    with timer("escape the values"):
        lines = [b"put " + escape(k) + b" " + escape(v) for k, v in zip(half, saved)]
    with timer(f"batch put of {len(half)} keys"):
        res = t.batch(d, lines, "put back")
    del lines
    t.check(res.rc == 0 and res.out == b"OK\n" * len(half),
            f"the put-back batch: want exit 0 and {len(half)} OK lines", res)
    st = t.stats(d, "after the puts")
    if st:
        t.check(st["live_keys"] == live0, f"after putting back: {st['live_keys']} live keys, "
                f"want {live0}", st["_res"])
        check_index_stats(t, st, "after putting back")
    keys2 = t.list_keys(d, "after putting back")
    t.check(keys2 is not None and sorted(keys2) == sorted(keys),
            "after putting back: the keys listed are not those listed after the import")

    out = t.path("big-copy.txt")
    with timer("export"):
        res = t.run([d, "export", out])
    t.ok(res, "export after putting back")
    with timer("compare"):
        same = os.path.exists(out) and filecmp.cmp(src, out, shallow=False)
    if not t.check(same, "the export is not byte-identical to the original file"):
        if os.path.exists(out):
            got = read(out)
            at = next((i for i in range(min(len(got), len(data))) if got[i] != data[i]),
                      min(len(got), len(data)))
            print(f"    export: {len(got)} bytes (sha {sha(got)}), original {len(data)} bytes "
                  f"(sha {sha(data)}); first difference at byte {at}: "
                  f"{got[max(0, at - 20):at + 40]!r} vs {data[max(0, at - 20):at + 40]!r}")
    print("timings: " + ", ".join(f"{label} {s:.1f} s" for label, s in timer.rows), flush=True)


# ---------------------------------------------------------------------------------------
# crash: kill -9 during imports
# ---------------------------------------------------------------------------------------

def group_crash(t):
    sc = scale()
    size = max(300_000, int(12 * 2 ** 20 * sc))
    # half the kills in a sanitizer build (CF_TEST_SANITIZED): the normal build runs them all
    share = 0.5 if os.environ.get("CF_TEST_SANITIZED") else 1.0
    iterations = int(os.environ.get("CF_KILL_ITERATIONS") or max(6, round(40 * sc * share)))
    src = t.path("crash.txt")
    data = gen_text(t.rng, size)
    write(src, data)
    recs = split_records(data)
    dist = distinct(recs)
    nd = len(dist)
    mf = manifest_framed(b"default", len(recs))
    fr = [framed(32, len(r)) for r in dist]
    cum = [HEADER]
    for x in fr:
        cum.append(cum[-1] + x)
    # `batch get` of the first k record keys must print exactly vals[:voff[k]].
    vals_parts = [b"VALUE " + escape(r) + NL for r in dist]
    voff = [0]
    for p in vals_parts:
        voff.append(voff[-1] + len(p))
    vals = b"".join(vals_parts)
    del vals_parts
    print(f"file: {len(data)} bytes, {len(recs)} records, {nd} distinct; {iterations} kills",
          flush=True)
    key_of = {}  # index of a distinct record -> its key, the same in every store

    err_path = t.path("import.err")

    def start_import(d):
        with open(err_path, "wb") as err:
            return subprocess.Popen([t.tool, d, "import", src], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=err, cwd=t.dir)

    # A whole import first: how long it takes here, and that it round-trips.
    cal = t.path("calibrate")
    start = time.monotonic()
    p = start_import(cal)
    rc = p.wait()
    full = time.monotonic() - start
    if not t.check(rc == 0, f"an uninterrupted import: exit {rc}: {read(err_path)[:300]!r}"):
        return
    print(f"an uninterrupted import takes {full:.2f} s here", flush=True)
    out = t.path("out.txt")
    res = t.run([cal, "export", out])
    t.check(res.rc == 0 and filecmp.cmp(src, out, shallow=False),
            "export after an uninterrupted import is not the file", res)
    t.check(t.log_size(cal) == cum[nd] + mf, f"the log of a whole import has "
            f"{t.log_size(cal)} bytes, want {cum[nd] + mf}")
    shutil.rmtree(cal)

    def verify(d, what, rc, before, cont_prev):
        """Checks a store after a kill. cont_prev: None for a fresh store, else (records
        stored, log size) after the previous iteration in this store. Returns (k, size)."""
        if before is None:
            res = t.run([d, "stats"])
            t.check(cont_prev is None and res.rc == 2,
                    f"{what}: no log after the kill, yet stats exits {res.rc}", res)
            return None
        st = t.stats(d, what)
        if st is None:
            t.check(False, f"{what}: the store does not open after the kill "
                    f"(log of {before} bytes)")
            return None
        # A torn tail is left out of the store but stays in the log: nothing that reads
        # changes it. `after` is where the store's records end.
        cut = st["truncated"]
        after = before - cut
        keys = t.list_keys(d, what)
        if keys is None:
            return None
        manifests = [k for k in keys if k.startswith(MANIFEST_PREFIX)]
        content = [k for k in keys if not k.startswith(MANIFEST_PREFIX)]
        t.check(manifests in ([], [DEFAULT_MANIFEST]), f"{what}: manifest keys {manifests!r}")
        t.check(all(HEX_KEY.fullmatch(k) for k in content),
                f"{what}: keys that are not 32 hex digits: "
                f"{[k for k in content if not HEX_KEY.fullmatch(k)][:3]!r}")
        k = len(content)
        if not t.check(k <= nd, f"{what}: {k} record keys, the file has {nd} distinct records"):
            return None
        if k:
            res = t.batch(d, [b"get " + x for x in content], "get")
            if not t.check(res.rc == 0 and res.out == vals[:voff[k]],
                           f"{what}: the {k} live records, in log order, are not the first {k}"
                           " distinct records of the file", res):
                try:
                    got = [unescape(x[6:]) for x in res.out.split(NL)[:-1]]
                    at = next((i for i, (a, b) in enumerate(zip(got, dist)) if a != b), None)
                    print(f"    {len(got)} values; first differing from the file's order at "
                          f"{at}: {short(got[at] if at is not None else None, 80)}; "
                          f"{sum(g in set(dist) for g in got)} are records of the file")
                except ValueError as e:
                    print(f"    values not escaped per README: {e}")
                return None
        for i, key in enumerate(content):
            if key_of.setdefault(i, key) != key:
                t.check(False, f"{what}: record {i} has key {key.decode()}, earlier "
                        f"{key_of[i].decode()} (a key is the record's content hash)")
                return None
        has_manifest = bool(manifests)
        t.check(not has_manifest or k == nd,
                f"{what}: a manifest with only {k} of {nd} records stored")
        if cont_prev is None:
            want = cum[k] + (mf if has_manifest else 0)
            t.check(after == want, f"{what}: the log has {after} bytes after reopening; "
                    f"{k} records{' and the manifest' if has_manifest else ''} take {want}")
        else:
            k0, size0 = cont_prev
            t.check(k >= k0, f"{what}: {k} records stored, {k0} before this import")
            grew = after - size0 - (cum[k] - cum[k0])
            t.check(grew in (0, mf), f"{what}: the log grew by {after - size0} bytes: "
                    f"{cum[k] - cum[k0]} for records {k0}..{k}, and {grew} more, neither 0 "
                    f"nor a manifest ({mf})")
        # Every record written whole survived: what was cut off is less than the record
        # that was being written.
        if rc == 0 or has_manifest:
            nxt = 1
        elif k < nd:
            nxt = fr[k]
        else:
            nxt = mf
        t.check(0 <= cut < nxt, f"{what}: a torn tail of {cut} bytes at reopen (log {before}"
                f" bytes); the record being written has {nxt} bytes, so a whole record "
                "was lost")
        t.check(t.log_size(d) == before, f"{what}: reading commands changed the log "
                f"({before} -> {t.log_size(d)} bytes)")
        if has_manifest:
            res = t.run([d, "export", out])
            t.check(res.rc == 0 and filecmp.cmp(src, out, shallow=False),
                    f"{what}: a completed import does not export the file", res)
        return k, after

    outcomes = {"killed": 0, "completed": 0, "killed before the log existed": 0}
    cuts = []

    def kill_run(d, delay, what_prefix, prev):
        """One import into d killed after delay seconds (unless it ends first), then
        verified. prev: (records, log size) of the store before, None if it is new.
        Returns (rc, (records, log size) or None, ok)."""
        p = start_import(d)
        time.sleep(delay)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        rc = p.wait()
        before = t.log_size(d)
        what = f"{what_prefix} (after {delay * 1000:.0f} ms, exit {rc}, log {before} bytes)"
        if rc == 0:
            outcomes["completed"] += 1
        elif rc == -signal.SIGKILL:
            outcomes["killed" if before is not None else "killed before the log existed"] += 1
        else:
            t.check(False, f"{what}: import failed: {read(err_path)[:300]!r}")
            return rc, None, False
        if before is not None and before < HEADER:
            t.check(False, f"{what}: a log shorter than its header ({before} bytes)")
            return rc, None, False
        r = verify(d, what, rc, before, prev)
        if r is not None:
            cuts.append(before - r[1])
            print(f"  {what}: {r[0]} of {nd} records", flush=True)
        return rc, r, not t.failures

    # Most kills in a fresh store; some in a continuing one, where an import resumes after
    # the crash of the one before (a chain); a chain whose import completed mostly starts
    # over, sometimes goes on (a complete store imported again: only the manifest).
    cont = t.path("continuing")
    cont_state = None  # (records, log size) of the continuing store; None: no store yet
    chains, chain_kills = 0, 0
    fresh_i = 0
    start_all = time.monotonic()
    for i in range(iterations):
        continuing = (i % 4 == 3) or t.rng.random() < 0.15
        if continuing:
            if cont_state is not None and cont_state[0] == nd and t.rng.random() < 0.7:
                shutil.rmtree(cont)
                cont_state = None
            if cont_state is None and not os.path.exists(cont):
                chains += 1
            d = cont
            label = f"kill {i} (chain {chains} of a continuing store)"
        else:
            d = t.path(f"fresh-{fresh_i % 2}")
            shutil.rmtree(d, ignore_errors=True)
            fresh_i += 1
            label = f"kill {i} (fresh store)"
        # A resumed import goes quickly over the records already stored: its delays
        # shrink with what is left to store, so that most resumed imports are killed too.
        left = 1.0 if not continuing or cont_state is None else (nd - cont_state[0]) / nd
        rc, r, ok = kill_run(d, t.rng.uniform(0, full * max(0.15, left)), label,
                             cont_state if continuing else None)
        if not ok:
            break
        if continuing:
            if r is not None:
                cont_state = r
            chain_kills += rc != 0
    print("outcomes: " + ", ".join(f"{k}: {v}" for k, v in outcomes.items())
          + f"; {chains} chains of continuing imports, {chain_kills} of them killed; bytes cut "
          f"off at reopen: max {max(cuts, default=0)}, {sum(c > 0 for c in cuts)} nonzero; "
          f"{time.monotonic() - start_all:.1f} s", flush=True)
    if t.failures:
        return

    # A store killed in the middle of its import, again and again; then a whole import: the
    # export is the file.
    final = t.path("final")
    state, kills = None, 0
    for j in range(8):
        left = 1.0 if state is None else (nd - state[0]) / nd
        rc, r, ok = kill_run(final, t.rng.uniform(0.1, 0.4) * full * max(0.1, left),
                             f"final store, kill {j}", state)
        if not ok:
            return
        if r is not None:
            state = r
        kills += rc != 0
        if kills >= 3 and state is not None and state[0] < nd:
            break
    t.section(f"a whole import into the store killed {kills} times "
              f"({state[0] if state else 0} of {nd} records stored)")
    res = t.run([final, "import", src])
    if t.ok(res, "import after the crashes"):
        t.check(re.search(rb"\b%d new\b" % (nd - (state[0] if state else 0)), res.out)
                is not None or b"new" not in res.out,
                f"import after the crashes: the summary does not say "
                f"{nd - (state[0] if state else 0)} records were new", res)
        res = t.run([final, "export", out])
        t.check(res.rc == 0 and filecmp.cmp(src, out, shallow=False),
                "export after a whole import into a crashed store is not the file", res)
        st = t.stats(final, "after the final import")
        if st:
            t.check(st["live_keys"] == nd + 1, f"after the final import: {st['live_keys']} live"
                    f" keys, want {nd + 1}", st["_res"])
        keys = t.list_keys(final, "after the final import")
        if keys is not None:
            content = [k for k in keys if k != DEFAULT_MANIFEST]
            t.check(len(content) == nd and all(key_of.get(i, k) == k
                                               for i, k in enumerate(content)),
                    "after the final import: the record keys are not those seen before, in "
                    "the file's order")
        t.ok(t.run([final, "compact"]), "compact")
        res = t.run([final, "export", out])
        t.check(res.rc == 0 and filecmp.cmp(src, out, shallow=False),
                "export after compacting is not the file", res)


# ---------------------------------------------------------------------------------------

GROUPS = {"basic": group_basic, "roundtrip": group_roundtrip, "crash": group_crash}


def main(argv):
    if len(argv) != 3 or argv[2] not in GROUPS:
        sys.stderr.write(__doc__)
        return 2
    tool, group = os.path.abspath(argv[1]), argv[2]
    seed = int(os.environ.get("CF_TEST_SEED") or DEFAULT_SEED)
    print(f"cuckoo-kv test {group}: tool {tool}, seed {seed} (CF_TEST_SEED), scale "
          f"{scale()} (CF_TEST_SCALE)", flush=True)
    if not os.access(tool, os.X_OK):
        print(f"{tool}: not an executable", flush=True)
        return 1
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"cuckoo-kv-{group}-") as d:
        t = Tester(tool, group, seed, d)
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
