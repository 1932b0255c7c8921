#!/usr/bin/env python3
"""The soak's load, its checks and its fault injectors, against one running
httplite. scripts/soak.sh starts the server and calls this once per runtime.

    soak_client.py make-root DIR
    soak_client.py run --port P --pid PID --root DIR --duration S [...]

`run` drives, until the duration is up:

* bulk volume from two wrk processes (scripts/lib/soak.lua checks every
  body): keep-alive plaintext/json, and pipelined batches of plaintext, json,
  a static file, a Range slice and an echo POST;
* checking clients here, each verifying every response byte for byte
  (status, framing, body, Content-Range): keep-alive and pipelined mixes,
  echo with Content-Length and chunked bodies, Range requests on big.bin
  (and whole 4 MiB downloads), and half-close (shutdown(SHUT_WR) right after
  the request: the full response must still arrive);
* faults: clients that close early (mid-response, mid-head, mid-body), reset
  mid-response (SO_LINGER 0), never read a large response (the server's fd
  for that connection must be gone within --write-timeout + slack: its socket
  inode is looked up in /proc/net/tcp and watched in /proc/PID/fd), send
  their head one byte a second (closed by --header-timeout), send 10 MiB of
  headers (431, then close). After each close/reset fault a fresh request
  must be answered correctly: that is what "survived" means for them.

Every `--sample` seconds the server's fd count (/proc/PID/fd) and RSS
(/proc/PID/status VmRSS) are sampled. Let W = min(60 s, duration / 3) be
"the first minute". The run fails if any sample after W exceeds
  fds: max(first W) * 1.2 + 64      rss: max(first W) * 1.2 + 32 MiB,
if the fd count at rest after the run (every client gone) is more than
FD_REST_SLACK above the fd count at rest before it (a leak of even a few fds
over the run shows here, however short), if any valid request got a wrong
or missing answer, if any fault was not survived, if wrk saw a socket error
or timeout or its per-kind counts left the fixed mix's ratios, if fewer
than --min-requests requests were verified, or if the server died. A
summary is printed and, with --json, written to a file.
"""
import argparse
import asyncio
import json
import os
import random
import re
import socket
import struct
import subprocess
import sys
import threading
import time

HELLO = b"Hello, World!"
JSON = b'{"message":"Hello, World!"}'
NOT_FOUND = b"404 Not Found\n"
MAX_ECHO = 900 * 1024  # under the server's default --max-body (1 MiB)
OP_TIMEOUT = 30.0  # any one checked exchange; far above what a healthy run needs
FD_SLACK, FD_GROWTH = 64, 1.2
RSS_SLACK_KB, RSS_GROWTH = 32 * 1024, 1.2
FD_REST_SLACK = 4
FIRST_WINDOW = 60.0
# Requests per write of each wrk client (scripts/lib/soak.lua) and its connections.
WRK_MIX = {
    "wrk-pipelined": {"plaintext": 11, "json": 2, "small": 1, "range": 1, "echo": 1},
    "wrk-keepalive": {"plaintext": 1, "json": 1},
}
WRK_CONNS = {"wrk-pipelined": 16, "wrk-keepalive": 8}


# ---------------------------------------------------------------------------
# The site
# ---------------------------------------------------------------------------

def make_root(d):
    """Files the soak serves: small text, a 256 KiB and a 4 MiB random file."""
    os.makedirs(d, exist_ok=True)
    rng = random.Random(7)
    small = "".join(f"line {i:04d} of small.txt, soak\n" for i in range(40)).encode()
    files = {
        "small.txt": small,
        "medium.bin": rng.randbytes(256 * 1024),
        "big.bin": rng.randbytes(4 * 1024 * 1024),
        "index.html": b"<!doctype html><title>soak</title><p>soak root</p>\n",
    }
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


class Site:
    def __init__(self, root):
        def rd(n):
            with open(os.path.join(root, n), "rb") as f:
                return f.read()

        self.small = rd("small.txt")
        self.medium = rd("medium.bin")
        self.big = rd("big.bin")


class Expect:
    """What a valid request must get back, exactly."""

    __slots__ = ("status", "body", "head", "length", "content_range", "what")

    def __init__(self, what, status, body=b"", head=False, length=None, content_range=None):
        self.what = what
        self.status = status
        self.body = body
        self.head = head
        self.length = length
        self.content_range = content_range


def get(path, extra=b""):
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: soak\r\n" + extra + b"\r\n"


def echo_sized(body):
    return (b"POST /_httplite/echo HTTP/1.1\r\nHost: soak\r\n"
            b"Content-Type: application/octet-stream\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


def echo_chunked(rng, body):
    out = [b"POST /_httplite/echo HTTP/1.1\r\nHost: soak\r\nTransfer-Encoding: chunked\r\n\r\n"]
    i = 0
    while i < len(body):
        n = min(len(body) - i, rng.choice((1, 7, 100, 1000, 4096, 65536, 300000)))
        ext = b";soak=1" if rng.random() < 0.2 else b""
        out.append(b"%x%s\r\n" % (n, ext) + body[i:i + n] + b"\r\n")
        i += n
    trailer = b"X-Soak-Trailer: yes\r\n" if rng.random() < 0.2 else b""
    out.append(b"0\r\n" + trailer + b"\r\n")
    return b"".join(out)


def range_req(rng, site, whole_every=0):
    n = len(site.big)
    if whole_every and rng.random() < 1 / whole_every:
        return get("/big.bin"), Expect("big.bin", 200, site.big)
    kind = rng.random()
    if kind < 0.7:
        a = rng.randrange(n)
        b = min(n - 1, a + rng.choice((0, 1, 100, 4096, 65535, 500000)))
        spec = f"{a}-{b}"
    elif kind < 0.85:
        a = rng.randrange(n)
        b = n - 1
        spec = f"{a}-"
    else:
        k = rng.randint(1, 200000)
        a, b = n - k, n - 1
        spec = f"-{k}"
    return (get("/big.bin", f"Range: bytes={spec}\r\n".encode()),
            Expect("range", 206, site.big[a:b + 1], content_range=f"bytes {a}-{b}/{n}"))


def mix_request(rng, site):
    """One request of the checked mix and its exact expected answer."""
    r = rng.random()
    if r < 0.25:
        return get("/_httplite/plaintext"), Expect("plaintext", 200, HELLO)
    if r < 0.35:
        return get("/_httplite/json"), Expect("json", 200, JSON)
    if r < 0.45:
        return get("/small.txt"), Expect("small.txt", 200, site.small)
    if r < 0.50:
        return get("/medium.bin"), Expect("medium.bin", 200, site.medium)
    if r < 0.55:
        return (b"HEAD /medium.bin HTTP/1.1\r\nHost: soak\r\n\r\n",
                Expect("HEAD", 200, head=True, length=len(site.medium)))
    if r < 0.70:
        return range_req(rng, site)
    if r < 0.80:
        return get(f"/missing-{rng.randrange(1000)}"), Expect("404", 404, NOT_FOUND)
    body = rng.randbytes(rng.choice((0, 1, 17, 1000, 8000)))
    if r < 0.90:
        return echo_sized(body), Expect("echo", 200, body)
    return echo_chunked(rng, body), Expect("echo-chunked", 200, body)


# ---------------------------------------------------------------------------
# Reading and checking responses
# ---------------------------------------------------------------------------

class Bad(Exception):
    """A valid request got a wrong (or no) answer."""


async def read_response(reader, head_only=False):
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw[:-4].split(b"\r\n")
    m = re.fullmatch(rb"(HTTP/1\.[01]) (\d{3}) ?(.*)", lines[0])
    if not m:
        raise Bad(f"bad status line {lines[0][:100]!r}")
    version, status = m.group(1), int(m.group(2))
    headers = []
    for ln in lines[1:]:
        name, sep, value = ln.partition(b":")
        if not sep or not name or name != name.strip():
            raise Bad(f"bad header line {ln[:100]!r}")
        headers.append((name.decode().lower(), value.strip().decode("latin-1")))
    hd = {}
    for n, v in headers:
        hd.setdefault(n, []).append(v)
    body = b""
    te = ",".join(hd.get("transfer-encoding", [])).lower()
    cls = hd.get("content-length", [])
    if te and cls:
        raise Bad("both Transfer-Encoding and Content-Length")
    if len(cls) > 1:
        raise Bad(f"{len(cls)} Content-Length headers")
    if head_only or status < 200 or status in (204, 304):
        pass
    elif "chunked" in te:
        parts = []
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line[:-2].split(b";")[0], 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                break
            parts.append(await reader.readexactly(size))
            if await reader.readexactly(2) != b"\r\n":
                raise Bad("chunk not followed by CRLF")
        body = b"".join(parts)
    elif cls:
        body = await reader.readexactly(int(cls[0]))
    else:
        raise Bad(f"{status} response with neither Content-Length nor chunked")
    return version, status, hd, body


def check(resp, exp):
    version, status, hd, body = resp
    if version != b"HTTP/1.1":
        raise Bad(f"{exp.what}: version {version!r}")
    if status != exp.status:
        raise Bad(f"{exp.what}: status {status}, expected {exp.status}")
    if exp.head:
        if hd.get("content-length") != [str(exp.length)]:
            raise Bad(f"{exp.what}: Content-Length {hd.get('content-length')}, expected {exp.length}")
    elif body != exp.body:
        raise Bad(f"{exp.what}: body of {len(body)} bytes differs from the expected {len(exp.body)}")
    if exp.content_range and hd.get("content-range") != [exp.content_range]:
        raise Bad(f"{exp.what}: Content-Range {hd.get('content-range')}, expected {exp.content_range}")


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

def set_linger_zero(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


class Soak:
    def __init__(self, a):
        self.a = a
        self.site = Site(a.root)
        self.port = a.port
        self.pid = a.pid
        self.stop_at = 0.0
        self.served = {}      # checking-client kind -> verified responses
        self.bad = {}         # kind -> wrong/missing answers
        self.bad_notes = []
        self.injected = {}    # fault kind -> count
        self.survived = {}
        self.fault_notes = []
        self.samples = []     # (t, fds, rss_kb, threads)
        self.server_died = None
        self.wrk = {}

    def running(self):
        return time.monotonic() < self.stop_at and self.server_died is None

    def ok(self, kind, n=1):
        self.served[kind] = self.served.get(kind, 0) + n

    def wrong(self, kind, note):
        self.bad[kind] = self.bad.get(kind, 0) + 1
        if len(self.bad_notes) < 20:
            self.bad_notes.append(f"{kind}: {note}")

    def fault(self, kind, survived, note=""):
        self.injected[kind] = self.injected.get(kind, 0) + 1
        if survived:
            self.survived[kind] = self.survived.get(kind, 0) + 1
        elif len(self.fault_notes) < 20:
            self.fault_notes.append(f"{kind}: {note}")

    async def connect(self, limit=1 << 21):
        r, w = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", self.port, limit=limit), OP_TIMEOUT)
        w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return r, w

    async def exchange(self, kind, conn, reqs):
        """Writes the requests in one go and checks every answer in order."""
        r, w = conn
        w.write(b"".join(q for q, _ in reqs))
        for _, exp in reqs:
            resp = await read_response(r, exp.head)
            check(resp, exp)
        self.ok(kind, len(reqs))

    async def checked_loop(self, kind, seed, make_batch, fresh_every=0):
        """A connection that sends `make_batch()` batches until the end;
        a wrong answer is counted and the connection replaced."""
        rng = random.Random(seed)
        conn = None
        n = 0
        while self.running():
            try:
                if conn is None:
                    conn = await self.connect()
                await asyncio.wait_for(self.exchange(kind, conn, make_batch(rng)), OP_TIMEOUT)
                n += 1
                if fresh_every and n % fresh_every == 0:
                    conn[1].close()
                    conn = None
            except (Bad, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    asyncio.TimeoutError, ValueError) as e:
                if not self.running() and not isinstance(e, Bad):
                    break  # the run ended mid-exchange
                self.wrong(kind, f"{type(e).__name__}: {e}")
                if conn:
                    conn[1].close()
                conn = None
                await asyncio.sleep(0.1)
        if conn:
            conn[1].close()

    # -- faults -------------------------------------------------------------

    async def probe(self):
        """A fresh request must be answered correctly after each fault."""
        try:
            conn = await self.connect()
            try:
                await asyncio.wait_for(self.exchange(
                    "probe", conn, [(get("/_httplite/plaintext"), Expect("probe", 200, HELLO))]),
                    OP_TIMEOUT)
            finally:
                conn[1].close()
            return True
        except (Bad, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
            self.wrong("probe", f"{type(e).__name__}: {e}")
            return False

    async def early_close_loop(self, seed, reset):
        kind = "reset-mid-response" if reset else "close-early"
        rng = random.Random(seed)
        while self.running():
            variant = rng.randrange(3)
            try:
                r, w = await self.connect()
                if variant == 0:  # mid-response
                    w.write(get("/big.bin"))
                    want = rng.randint(0, 512 * 1024)
                    got = 0
                    while got < want:
                        chunk = await asyncio.wait_for(r.read(65536), OP_TIMEOUT)
                        if not chunk:
                            break
                        got += len(chunk)
                elif variant == 1:  # mid-head
                    w.write(get("/_httplite/plaintext")[:rng.randint(1, 30)])
                    await w.drain()
                else:  # mid-body
                    w.write(b"POST /_httplite/echo HTTP/1.1\r\nHost: soak\r\n"
                            b"Content-Length: 100000\r\n\r\n" + rng.randbytes(rng.randint(0, 5000)))
                    await w.drain()
                await asyncio.sleep(rng.random() * 0.05)
                if reset:
                    set_linger_zero(w.get_extra_info("socket"))
                    w.transport.abort()
                else:
                    w.close()
            except (OSError, asyncio.TimeoutError) as e:
                self.fault(kind, False, f"setting up: {e}")
                continue
            self.fault(kind, await self.probe(), "probe after the fault failed")
            await asyncio.sleep(0.02)

    async def half_close_loop(self, seed):
        rng = random.Random(seed)
        while self.running():
            req, exp = mix_request(rng, self.site)
            try:
                r, w = await self.connect()
                try:
                    w.write(req)
                    await w.drain()
                    w.write_eof()  # shutdown(SHUT_WR)
                    resp = await asyncio.wait_for(read_response(r, exp.head), OP_TIMEOUT)
                    check(resp, exp)
                    rest = await asyncio.wait_for(r.read(1), OP_TIMEOUT)
                    if rest:
                        raise Bad(f"bytes after the response to a half-closed request: {rest!r}")
                finally:
                    w.close()
                self.ok("half-close")
                self.fault("half-close", True)
            except (Bad, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError,
                    asyncio.LimitOverrunError) as e:
                self.wrong("half-close", f"{exp.what}: {type(e).__name__}: {e}")
                self.fault("half-close", False, str(e))
            await asyncio.sleep(0.01)

    def server_socket_inodes(self):
        inodes = set()
        base = f"/proc/{self.pid}/fd"
        for fd in os.listdir(base):
            try:
                link = os.readlink(f"{base}/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(int(link[8:-1]))
        return inodes

    def server_side_inode(self, client_port):
        """The inode of the server's socket for the connection from
        `client_port` (0 while it is still in the accept queue)."""
        want_local = f"0100007F:{self.port:04X}"
        want_remote = f"0100007F:{client_port:04X}"
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                p = line.split()
                if p[1] == want_local and p[2] == want_remote:
                    return int(p[9])
        return 0

    async def never_read_loop(self, per_round=4):
        kind = "never-read"
        limit = self.a.write_timeout + 10.0
        while self.running():
            socks, inodes = [], []
            for _ in range(per_round):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.settimeout(5)
                s.connect(("127.0.0.1", self.port))
                # 8 pipelined 4 MiB files: far more than both socket buffers.
                s.sendall(get("/big.bin") * 8)
                socks.append(s)
            t0 = time.monotonic()
            for s in socks:
                port = s.getsockname()[1]
                inode = 0
                while time.monotonic() - t0 < 5:
                    inode = self.server_side_inode(port)
                    if inode and inode in self.server_socket_inodes():
                        break
                    await asyncio.sleep(0.1)
                inodes.append(inode)
            pending = {i for i in inodes if i}
            for i in inodes:
                if not i:
                    self.fault(kind, False, "the server never held the connection")
            while pending and time.monotonic() - t0 < limit and self.server_died is None:
                await asyncio.sleep(0.5)
                held = self.server_socket_inodes()
                for i in list(pending):
                    if i not in held:
                        pending.discard(i)
                        self.fault(kind, True)
            for _ in pending:
                self.fault(kind, False, f"server still holds the connection after {limit:.0f} s")
            for s in socks:
                set_linger_zero(s)
                s.close()

    async def slow_header_loop(self):
        kind = "one-byte-a-second"
        limit = self.a.header_timeout + 8.0
        head = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: soak\r\nX-Slow: " + b"a" * 1000
        while self.running():
            try:
                r, w = await self.connect()
            except (OSError, asyncio.TimeoutError) as e:
                self.fault(kind, False, f"connect: {e}")
                continue
            t0 = time.monotonic()
            got = b""
            closed = False
            for i in range(int(limit) + 1):
                try:
                    w.write(head[i:i + 1])
                    chunk = await asyncio.wait_for(r.read(4096), 1.0)
                except asyncio.TimeoutError:
                    continue
                except OSError:
                    closed = True
                    break
                if not chunk:
                    closed = True
                    break
                got += chunk
            took = time.monotonic() - t0
            w.close()
            if not closed:
                self.fault(kind, False, f"still open after {took:.1f} s")
            elif got and not got.startswith(b"HTTP/1.1 408 "):
                self.fault(kind, False, f"unexpected answer {got[:60]!r}")
            else:
                self.fault(kind, True)

    def huge_headers_once(self):
        """10 MiB of header lines: a 431, then the close. Blocking sockets in
        a thread, so that what arrived can be read even after the server's
        close turned our remaining writes into a reset."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=OP_TIMEOUT)
        try:
            line = b"X-Filler: " + b"f" * 1000 + b"\r\n"
            payload = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: soak\r\n" + line * (10 * 1024)

            def send():
                try:
                    s.sendall(payload)
                except OSError:
                    pass  # the server closed first, as it may

            t = threading.Thread(target=send, daemon=True)
            t.start()
            got = b""
            while len(got) < 1 << 20:
                try:
                    chunk = s.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
                got += chunk
            t.join(OP_TIMEOUT)
            m = re.match(rb"HTTP/1\.1 (\d{3}) ", got)
            if not m:
                return False, f"no status line, got {got[:60]!r}"
            if m.group(1) != b"431":
                return False, f"status {m.group(1).decode()}"
            return True, ""
        finally:
            set_linger_zero(s)
            s.close()

    async def huge_headers_loop(self):
        kind = "10MiB-headers"
        while self.running():
            try:
                ok, note = await asyncio.to_thread(self.huge_headers_once)
            except OSError as e:
                ok, note = False, str(e)
            self.fault(kind, ok and await self.probe(), note or "probe failed")
            await asyncio.sleep(0.5)

    # -- sampling and wrk ---------------------------------------------------

    def sample_once(self):
        try:
            fds = len(os.listdir(f"/proc/{self.pid}/fd"))
            rss = threads = 0
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
                    elif line.startswith("Threads:"):
                        threads = int(line.split()[1])
                    elif line.startswith("State:") and line.split()[1] in ("Z", "X"):
                        raise FileNotFoundError
            return fds, rss, threads
        except (FileNotFoundError, ProcessLookupError):
            return None

    async def sampler(self, t0):
        while time.monotonic() < self.stop_at:
            await asyncio.sleep(min(self.a.sample, max(0.0, self.stop_at - time.monotonic())))
            s = self.sample_once()
            if s is None:
                self.server_died = f"the server (pid {self.pid}) died"
                return
            self.samples.append((round(time.monotonic() - t0, 1),) + s)
            if self.a.verbose:
                print(f"  t={self.samples[-1][0]:6.1f}s fds={s[0]} rss={s[1] // 1024} MiB "
                      f"threads={s[2]} verified={sum(self.served.values())}", flush=True)

    async def run_wrk(self, name, mode, conns):
        cmd = ["wrk", "-t1", f"-c{conns}", f"-d{self.a.duration}s",
               "--timeout", "10s", "-s", self.a.lua,
               f"http://127.0.0.1:{self.port}/", "--", self.a.root, mode]
        p = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE,
                                                 stderr=asyncio.subprocess.STDOUT)
        out = (await p.communicate())[0].decode(errors="replace")
        res = {"exit": p.returncode, "ok": 0, "bad": 0, "errors": {}, "kinds": {}, "raw": out}
        for line in out.splitlines():
            if line.startswith("SOAK_WRK "):
                kv = dict(x.split("=") for x in line.split()[1:])
                res["ok"], res["bad"] = int(kv.pop("ok")), int(kv.pop("bad"))
                res["responses"] = int(kv.pop("responses"))
                res["kinds"] = {k: int(v) for k, v in kv.items()}
            elif line.startswith("SOAK_WRK_ERRORS "):
                res["errors"] = {k: int(v) for k, v in (x.split("=") for x in line.split()[1:])}
            elif line.startswith("SOAK_WRK_FIRST_BAD "):
                res["first_bad"] = line[len("SOAK_WRK_FIRST_BAD "):]
        self.wrk[name] = res

    async def warm_up(self):
        rng = random.Random(1)
        conn = await self.connect()
        batch = [mix_request(rng, self.site) for _ in range(50)]
        await asyncio.wait_for(self.exchange("warm-up", conn, batch), OP_TIMEOUT)
        conn[1].close()
        self.served.pop("warm-up", None)

    async def fds_at_rest(self, settle):
        """The fd count once it stops changing (bounded by `settle` s)."""
        last, same_since = None, time.monotonic()
        end = time.monotonic() + settle
        while time.monotonic() < end:
            s = self.sample_once()
            if s is None:
                return None
            if s[0] != last:
                last, same_since = s[0], time.monotonic()
            elif time.monotonic() - same_since >= 1.0:
                break
            await asyncio.sleep(0.2)
        return last

    async def run(self):
        a = self.a
        await self.warm_up()
        rest_before = await self.fds_at_rest(10)
        t0 = time.monotonic()
        self.stop_at = t0 + a.duration
        tasks = [
            self.sampler(t0),
            self.run_wrk("wrk-keepalive", "keepalive", WRK_CONNS["wrk-keepalive"]),
            self.run_wrk("wrk-pipelined", "pipelined", WRK_CONNS["wrk-pipelined"]),
        ]
        site = self.site
        for i in range(3):
            tasks.append(self.checked_loop("keepalive", 100 + i,
                                           lambda rng: [mix_request(rng, site)], fresh_every=500))
        for i in range(2):
            tasks.append(self.checked_loop(
                "pipelined", 200 + i,
                lambda rng: [mix_request(rng, site) for _ in range(rng.randint(2, 24))]))

        def echo_batch(rng, chunked):
            body = rng.randbytes(rng.choice((0, 1, 1000, 65536, 200000, MAX_ECHO)))
            if chunked:
                return [(echo_chunked(rng, body), Expect("echo-chunked", 200, body))]
            return [(echo_sized(body), Expect("echo", 200, body))]

        tasks.append(self.checked_loop("echo-sized", 300, lambda rng: echo_batch(rng, False)))
        tasks.append(self.checked_loop("echo-chunked", 301, lambda rng: echo_batch(rng, True)))
        tasks.append(self.checked_loop("range", 400,
                                       lambda rng: [range_req(rng, site, whole_every=20)]))
        tasks.append(self.half_close_loop(500))
        tasks.append(self.early_close_loop(600, reset=False))
        tasks.append(self.early_close_loop(700, reset=True))
        tasks.append(self.never_read_loop())
        tasks.append(self.slow_header_loop())
        tasks.append(self.slow_header_loop())
        tasks.append(self.huge_headers_loop())
        await asyncio.gather(*tasks)
        elapsed = time.monotonic() - t0
        rest_after = None
        if self.server_died is None and self.sample_once() is not None:
            rest_after = await self.fds_at_rest(15)
        else:
            self.server_died = self.server_died or f"the server (pid {self.pid}) died"
        return self.report(elapsed, rest_before, rest_after)

    # -- verdict ------------------------------------------------------------

    def report(self, elapsed, rest_before, rest_after):
        a = self.a
        failures = []
        window = min(FIRST_WINDOW, a.duration / 3)
        first = [s for s in self.samples if s[0] <= window]
        after = [s for s in self.samples if s[0] > window]
        last = [s for s in self.samples if s[0] >= self.samples[-1][0] - window] if self.samples else []
        growth = {}
        if first and after:
            fd_bound = max(s[1] for s in first) * FD_GROWTH + FD_SLACK
            rss_bound = max(s[2] for s in first) * RSS_GROWTH + RSS_SLACK_KB
            worst_fd = max(after, key=lambda s: s[1])
            worst_rss = max(after, key=lambda s: s[2])
            growth = {
                "window_s": round(window, 1),
                "fd_first_max": max(s[1] for s in first), "fd_last_max": max(s[1] for s in last),
                "fd_bound": int(fd_bound),
                "rss_first_max_kb": max(s[2] for s in first), "rss_last_max_kb": max(s[2] for s in last),
                "rss_bound_kb": int(rss_bound),
            }
            if worst_fd[1] > fd_bound:
                failures.append(f"fd count {worst_fd[1]} at t={worst_fd[0]} s exceeds the bound {fd_bound:.0f}")
            if worst_rss[2] > rss_bound:
                failures.append(f"RSS {worst_rss[2]} KiB at t={worst_rss[0]} s exceeds the bound {rss_bound:.0f} KiB")
        else:
            failures.append("too few fd/RSS samples to judge growth")
        if self.server_died:
            failures.append(self.server_died)
        if rest_before is not None and rest_after is not None and rest_after > rest_before + FD_REST_SLACK:
            failures.append(f"fds at rest grew from {rest_before} to {rest_after} (leak)")
        served = dict(self.served)
        wrk_bad = 0
        for name, w in sorted(self.wrk.items()):
            served[name] = w["ok"]
            wrk_bad += w["bad"]
            if w["bad"]:
                failures.append(f"{name}: {w['bad']} wrong answers (first: {w.get('first_bad')})")
            errs = {k: v for k, v in w["errors"].items() if v}
            if w["exit"] != 0 or "responses" not in w:
                failures.append(f"{name}: wrk failed (exit {w['exit']}): {w['raw'][-500:]}")
            elif errs:
                failures.append(f"{name}: wrk socket errors {errs}")
            elif w["ok"] + w["bad"] != w["responses"]:
                failures.append(f"{name}: {w['responses']} responses but {w['ok'] + w['bad']} checked")
            # The mix per write is fixed (soak.lua), so each kind's count keeps
            # its share, to within the requests in flight when wrk stopped.
            k = w["kinds"]
            per_write = WRK_MIX.get(name, {})
            if per_write and all(x in k for x in per_write):
                base = k["plaintext"] / per_write["plaintext"]
                slack = 16 * WRK_CONNS[name]
                for kind, m in per_write.items():
                    if abs(k[kind] - m * base) > slack:
                        failures.append(f"{name}: {k[kind]} {kind} answers, expected about "
                                        f"{m * base:.0f} from the fixed mix {per_write}")
            elif per_write:
                failures.append(f"{name}: per-kind counts missing: {k}")
        wrong = sum(self.bad.values()) + wrk_bad
        if self.bad:
            failures.append(f"wrong or missing answers: {self.bad}; first: {self.bad_notes[:5]}")
        not_survived = {k: v - self.survived.get(k, 0) for k, v in self.injected.items()
                        if v != self.survived.get(k, 0)}
        if not_survived:
            failures.append(f"faults not survived: {not_survived}; first: {self.fault_notes[:5]}")
        for k in ("close-early", "reset-mid-response", "half-close", "never-read",
                  "one-byte-a-second", "10MiB-headers"):
            if not self.injected.get(k):
                failures.append(f"no {k} fault was injected")
        total = sum(served.values())
        if total < a.min_requests:
            failures.append(f"{total} requests verified, fewer than the required {a.min_requests}")
        res = {
            "runtime": a.runtime, "duration_s": round(elapsed, 1), "verified": total,
            "served": served, "wrong": wrong, "injected": self.injected,
            "survived": self.survived, "growth": growth, "fds_at_rest": [rest_before, rest_after],
            "samples": self.samples, "wrk_kinds": {k: w["kinds"] for k, w in self.wrk.items()},
            "failures": failures,
        }
        print(summary_text(res), flush=True)
        return res


def summary_text(res):
    out = [f"--- soak summary: runtime {res['runtime']}, {res['duration_s']} s ---"]
    out.append(f"requests verified: {res['verified']:,} "
               f"({res['verified'] / max(res['duration_s'], 1e-9):,.0f}/s), wrong answers: {res['wrong']}")
    for k, v in sorted(res["served"].items()):
        out.append(f"  {k:<16} {v:>12,}")
    out.append("faults (injected / survived):")
    for k, v in sorted(res["injected"].items()):
        out.append(f"  {k:<20} {v:>7,} / {res['survived'].get(k, 0):,}")
    g = res["growth"]
    if g:
        out.append(f"fds: first {g['window_s']} s max {g['fd_first_max']}, last {g['window_s']} s max "
                   f"{g['fd_last_max']} (bound {g['fd_bound']}); at rest before/after: "
                   f"{res['fds_at_rest'][0]}/{res['fds_at_rest'][1]}")
        out.append(f"RSS: first {g['window_s']} s max {g['rss_first_max_kb'] / 1024:.1f} MiB, last "
                   f"{g['window_s']} s max {g['rss_last_max_kb'] / 1024:.1f} MiB "
                   f"(bound {g['rss_bound_kb'] / 1024:.1f} MiB)")
    out.append("result: " + ("PASS" if not res["failures"] else "FAIL"))
    for f in res["failures"]:
        out.append(f"  FAIL: {f}")
    return "\n".join(out)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "make-root":
        make_root(sys.argv[2])
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cmd", choices=["run"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--runtime", default="?")
    p.add_argument("--duration", type=int, default=600)
    p.add_argument("--sample", type=float, default=10.0, help="seconds between fd/RSS samples")
    p.add_argument("--min-requests", type=int, default=0)
    p.add_argument("--write-timeout", type=float, required=True, help="the server's, in seconds")
    p.add_argument("--header-timeout", type=float, required=True, help="the server's, in seconds")
    p.add_argument("--lua", default=os.path.join(os.path.dirname(__file__), "soak.lua"))
    p.add_argument("--json", help="write the result here")
    p.add_argument("--verbose", action="store_true", help="print every sample")
    a = p.parse_args()
    res = asyncio.run(Soak(a).run())
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)
    return 1 if res["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
