"""Shared helpers for the module tests: real redis-server processes on free loopback ports,
and a raw RESP2/RESP3 client that keeps the exact type of every reply.

Environment:
  CF_REDIS_MODULE   path of redis-cuckoofilter.so (default: build/redis-cuckoofilter.so)
  CF_REDIS_SERVER   the server binary (default: redis-server on PATH; valkey-server works too)
  CF_REDIS_CLI      its command-line client, for `--cluster create` (default: redis-cli on
                    PATH; valkey-cli for valkey-server)
  CF_TEST_SEED      seed for the random parts (printed on failure by each test)
  CF_TEST_SCALE     a positive number, default 1: how many random cases the slow tests
                    draw (2 doubles them: the long form; 0.5 halves them). Every kind of
                    check runs at any scale.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE = os.environ.get("CF_REDIS_MODULE", os.path.join(ROOT, "build", "redis-cuckoofilter.so"))
SERVER = os.environ.get("CF_REDIS_SERVER", shutil.which("redis-server") or "redis-server")
CLI = os.environ.get("CF_REDIS_CLI", shutil.which("redis-cli") or "redis-cli")


def test_seed(default=0x5EED):
    value = os.environ.get("CF_TEST_SEED")
    return int(value, 0) if value else default


def test_scale():
    value = os.environ.get("CF_TEST_SCALE")
    scale = float(value) if value else 1.0
    if not 0 < scale < 1e6:
        raise ValueError(f"CF_TEST_SCALE={value}: want a positive number")
    return scale


def scaled(n, least=1):
    """n random cases times CF_TEST_SCALE, at least `least`."""
    return max(least, round(n * test_scale()))


def free_port():
    """A TCP port that was free a moment ago (the server is started right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A redis-server with the module loaded, in its own temporary directory.

    Use as a context manager; stop() kills it and removes the directory (unless keep=True).
    extra: additional config lines as (name, value...) tuples, e.g. ("appendonly", "yes").
    module_args: arguments after the module path on the loadmodule line.
    """

    def __init__(self, extra=(), module_args=(), directory=None, port=None, module=True):
        self.port = port or free_port()
        self.dir = directory or tempfile.mkdtemp(prefix="cf-redis-")
        self.owns_dir = directory is None
        self.extra = list(extra)
        self.module_args = list(module_args)
        self.module = module
        self.proc = None

    def config_lines(self):
        lines = [
            "bind 127.0.0.1",
            f"port {self.port}",
            f"dir {self.dir}",
            "save ''",
            "appendonly no",
            "enable-debug-command yes",
            f"logfile {os.path.join(self.dir, 'server.log')}",
            "daemonize no",
        ]
        if self.module:
            lines.append(" ".join(["loadmodule", MODULE] + [str(a) for a in self.module_args]))
        for item in self.extra:
            lines.append(" ".join(str(x) for x in item))
        return lines

    def start(self, timeout=10.0):
        """Start the server and wait until it answers; if it does not, it is stopped (its
        directory kept for the log) and RuntimeError says why."""
        try:
            return self._start(timeout)
        except BaseException:
            self.stop(remove=False)
            raise

    def _start(self, timeout):
        conf = os.path.join(self.dir, f"redis-{self.port}.conf")
        with open(conf, "w") as f:
            f.write("\n".join(self.config_lines()) + "\n")
        self.proc = subprocess.Popen([SERVER, conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited ({self.proc.returncode}):\n{self.log()}")
            try:
                with Client(self.port) as c:
                    if c.call("PING") == "PONG":
                        # Wait out an initial load (RDB/AOF) too.
                        if b"loading:0" in c.call("INFO", "persistence"):
                            return self
            except (OSError, RespError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not start:\n{self.log()}")

    def log(self):
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return "(no log)"

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, remove=True):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if remove and self.owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self):
        self.stop(remove=False)
        return self.start()

    def client(self, protocol=2):
        return Client(self.port, protocol=protocol)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()


class RespError(Exception):
    """An error reply; str() is the exact text after the leading '-'."""


class Simple(str):
    """A RESP simple string (+...), as opposed to a bulk string (bytes)."""


class Verbatim(str):
    pass


class Client:
    """Raw RESP client. Replies keep their RESP type:
    simple string -> Simple (a str), bulk -> bytes, integer -> int, null -> None,
    array -> list, RESP3 map -> dict (as a list of pairs in .pairs), boolean -> bool,
    double -> float, error -> RespError instance (returned, not raised, by call_raw;
    raised by call)."""

    def __init__(self, port, protocol=2, timeout=60):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        if protocol == 3:
            self.call("HELLO", "3")

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, str):
                a = a.encode()
            elif isinstance(a, int):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def send(self, *args):
        self.sock.sendall(self.encode(args))

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(max(1 << 20, n + 2 - len(self.buf)))
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return Simple(rest.decode())
        if kind == b"-":
            return RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        if kind == b"%":
            n = int(rest)
            pairs = [(self.read(), self.read()) for _ in range(n)]
            d = dict(pairs)
            return RespMap(d, pairs)
        if kind == b"_":
            return None
        if kind == b"#":
            return rest == b"t"
        if kind == b",":
            return float(rest)
        if kind == b"=":
            n = int(rest)
            return Verbatim(self._exact(n)[4:].decode())
        if kind in (b"~", b">"):
            n = int(rest)
            return [self.read() for _ in range(n)]
        raise ValueError(f"unknown RESP type {line!r}")

    def call_raw(self, *args):
        self.send(*args)
        return self.read()

    def call(self, *args):
        r = self.call_raw(*args)
        if isinstance(r, RespError):
            raise r
        return r

    def pipeline(self, commands):
        """Send many commands at once, then read every reply (errors returned in place)."""
        self.sock.sendall(b"".join(self.encode(c) for c in commands))
        return [self.read() for _ in commands]


class RespMap(dict):
    def __init__(self, d, pairs):
        super().__init__(d)
        self.pairs = pairs


def wait_for(cond, timeout=20.0, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")
