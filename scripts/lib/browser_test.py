#!/usr/bin/env python3
"""The dashboard in a real browser: start httplite, load /_httplite/ in
headless Chromium, drive load, and check the page's figures against
/_httplite/stats; save a screenshot. Run by scripts/browser-test.sh.

Chromium is driven over the DevTools protocol, with a small WebSocket
client written here on the standard library (no package to install).
Every process started here is stopped by its own PID at the end.
"""

import argparse
import base64
import http.client
import json
import os
import re
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

RUNTIMES = ["stackless", "stackful", "threads", "threadpool", "fork", "uring"]


def fail(msg):
    print(f"browser-test: FAIL: {msg}", file=sys.stderr)
    raise SystemExit(1)


# ---------------------------------------------------------------------------
# A WebSocket client (RFC 6455), enough for the DevTools protocol
# ---------------------------------------------------------------------------


class WebSocket:
    def __init__(self, url, timeout=30):
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        if not m:
            fail(f"unexpected DevTools URL {url!r}")
        host, port, path = m.group(1), int(m.group(2)), m.group(3)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                fail("DevTools closed the WebSocket handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            fail(f"DevTools refused the WebSocket: {head[:200]!r}")

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                fail("DevTools closed the WebSocket")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text):
        payload = text.encode()
        head = bytearray([0x81])  # FIN, text
        n = len(payload)
        if n < 126:
            head.append(0x80 | n)
        elif n < 1 << 16:
            head.append(0x80 | 126)
            head += struct.pack(">H", n)
        else:
            head.append(0x80 | 127)
            head += struct.pack(">Q", n)
        mask = os.urandom(4)
        head += mask
        self.sock.sendall(bytes(head) + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def recv(self):
        """One message (text), answering pings."""
        parts = []
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack(">H", self._read(2))
            elif n == 127:
                (n,) = struct.unpack(">Q", self._read(8))
            mask = self._read(4) if b1 & 0x80 else None
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if opcode == 0x8:
                fail("DevTools closed the WebSocket")
            if opcode == 0x9:  # ping: pong (client frames are masked)
                m = os.urandom(4)
                self.sock.sendall(bytes([0x8A, 0x80 | len(data)]) + m + bytes(x ^ m[i % 4] for i, x in enumerate(data)))
                continue
            if opcode in (0x1, 0x2, 0x0):
                parts.append(data)
                if b0 & 0x80:
                    return b"".join(parts).decode()


class Cdp:
    """The DevTools protocol over one browser WebSocket, one page session."""

    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.next_id = 0
        self.session = None
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method, params=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        end = time.time() + timeout
        while time.time() < end:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    fail(f"{method}: {reply['error']}")
                return reply.get("result", {})
        fail(f"{method}: no answer within {timeout} s")

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in r:
            fail(f"page script error: {r['exceptionDetails']}")
        return r["result"].get("value")

    def navigate(self, url):
        self.call("Page.navigate", {"url": url})

    def wait(self, expr, timeout, what):
        # The page may not have loaded yet: an error counts as not yet.
        expr = f"(() => {{ try {{ return !!({expr}); }} catch (e) {{ return false; }} }})()"
        end = time.time() + timeout
        while time.time() < end:
            if self.eval(expr):
                return
            time.sleep(0.2)
        fail(f"{what} (waited {timeout} s)")

    def screenshot(self, path, width=1280, height=1150):
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        time.sleep(1.5)  # a sample or two at the new size
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))


# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------


def read_line(proc, stream, timeout, pattern):
    """The first line of `stream` matching `pattern` (a regex), or fail."""
    end = time.time() + timeout
    buf = b""
    fd = stream.fileno()
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            buf += chunk
            for line in buf.decode(errors="replace").splitlines():
                m = re.search(pattern, line)
                if m:
                    return m
        if proc.poll() is not None:
            break
    fail(f"no line matching {pattern!r} (exit {proc.poll()}): {buf.decode(errors='replace')[-2000:]}")


def stop(proc):
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_server(binary, runtime, extra, admin=None):
    """Starts httplite; (process, host, port), and the admin listener's
    (host, port) after them when `admin` asks for one (e.g. "127.0.0.1:0")."""
    args = [binary, "--bind", "127.0.0.1:0", "--runtime", runtime] + extra
    if admin:
        args += ["--admin", admin]
    if runtime != "fork":
        args += ["--workers", "2"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    m = read_line(proc, proc.stdout, 15,
                  r"listening on http://([0-9.]+:\d+)(?:; admin on http://([0-9.]+:\d+))?")
    host, port = m.group(1).rsplit(":", 1)
    if not admin:
        return proc, host, int(port)
    if not m.group(2):
        fail(f"no admin listener in the start-up line: {m.group(0)}")
    ahost, aport = m.group(2).rsplit(":", 1)
    return proc, host, int(port), (ahost, int(aport))


def start_chromium(chromium, profile):
    args = [
        chromium,
        "--headless",
        # Root in a container has no user namespace for Chromium's sandbox.
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--remote-debugging-port=0",
        f"--user-data-dir={profile}",
        "--window-size=1280,1500",
        "about:blank",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    m = read_line(proc, proc.stderr, 30, r"DevTools listening on (ws://\S+)")
    # Keep draining stderr so that Chromium never blocks on it.
    threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()
    return proc, m.group(1)


def stats(host, port):
    c = http.client.HTTPConnection(host, port, timeout=10)
    c.request("GET", "/_httplite/stats")
    r = c.getresponse()
    doc = json.loads(r.read())
    c.close()
    return doc


class Load:
    """Bounded load: `conns` keep-alive clients, each until `seconds` pass
    or `max_requests` are sent; every tenth request is a 404."""

    def __init__(self, host, port, conns, seconds, max_requests):
        self.sent = 0
        self.lock = threading.Lock()
        self.end = time.time() + seconds
        self.max = max_requests
        self.bad = 0
        self.threads = [threading.Thread(target=self.run, args=(host, port), daemon=True) for _ in range(conns)]
        self.threads.append(threading.Thread(target=self.run_bad, args=(host, port), daemon=True))
        self.started = time.time()
        for t in self.threads:
            t.start()

    def run(self, host, port):
        c = http.client.HTTPConnection(host, port, timeout=10)
        i = 0
        while time.time() < self.end:
            with self.lock:
                if self.sent >= self.max:
                    break
                self.sent += 1
            i += 1
            c.request("GET", "/_httplite/nope" if i % 10 == 0 else "/_httplite/plaintext")
            c.getresponse().read()
        c.close()

    def run_bad(self, host, port):
        """A malformed request every 0.2 s: answered 400 and counted."""
        while time.time() < self.end:
            with socket.create_connection((host, port), timeout=10) as c:
                c.sendall(b"NOT HTTP\r\n\r\n")
                while c.recv(4096):
                    pass
            self.bad += 1
            time.sleep(0.2)

    def join(self):
        for t in self.threads:
            t.join()
        return self.sent, time.time() - self.started


# ---------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------

FIGURES = """JSON.stringify({
  updates: +document.body.dataset.updates,
  source: document.body.dataset.source,
  rps: +document.getElementById('rps').dataset.value,
  open: +document.getElementById('open').dataset.value,
  requests: +document.getElementById('requests').dataset.value,
  connections: +document.getElementById('connections').dataset.value,
  viewers: +document.getElementById('viewers').dataset.value,
  errors: +document.getElementById('errors-per-min').dataset.value,
  r2xx: +(document.getElementById('total-responses-2xx') || {dataset: {value: -1}}).dataset.value,
  r4xx: +(document.getElementById('total-responses-4xx') || {dataset: {value: -1}}).dataset.value,
  worker_requests: [...document.querySelectorAll('td[data-key="requests"]')].map(e => +e.dataset.value),
  worker_keys: [...new Set([...document.querySelectorAll('td[data-key]')].map(e => e.dataset.key))],
  pool: !!document.getElementById('group-pool'),
})"""


def figures(cdp):
    return json.loads(cdp.eval(FIGURES))


def close_enough(a, b, rel, absolute):
    return abs(a - b) <= max(absolute, rel * max(abs(a), abs(b)))


def check_dashboard(cdp, host, port, runtime, load_seconds, shot):
    base = f"http://{host}:{port}"
    cdp.navigate(base + "/_httplite/")
    cdp.wait("+document.body.dataset.updates >= 2", 15, f"[{runtime}] the page got no events")
    f = figures(cdp)
    if f["source"] != "sse":
        fail(f"[{runtime}] the page reads {f['source']!r}, not Server-Sent Events")
    # Load, and the page's rate beside the server's over the same seconds.
    load = Load(host, port, conns=2, seconds=load_seconds, max_requests=int(40_000 * load_seconds))
    time.sleep(1.5)
    s0 = stats(host, port)
    page_rates = []
    # The screenshot is taken under load (live figures), halfway through.
    shot_at = load.started + max(1.5, load_seconds / 2)
    while time.time() < load.end - 0.5:
        time.sleep(0.5)
        page_rates.append(figures(cdp)["rps"])
        if shot and time.time() >= shot_at:
            cdp.screenshot(shot)
            print(f"  [{runtime}] screenshot: {shot}")
            shot = None
    s1 = stats(host, port)
    sent, took = load.join()
    server_rps = (s1["requests"] - s0["requests"]) / (s1["uptime_seconds"] - s0["uptime_seconds"])
    page_rps = sorted(page_rates)[len(page_rates) // 2] if page_rates else 0
    print(
        f"  [{runtime}] load: {sent} requests in {took:.1f} s ({sent / took:.0f}/s); "
        f"server {server_rps:.0f} req/s; page (median of {len(page_rates)} readings) {page_rps:.0f} req/s"
    )
    if page_rps <= 0:
        fail(f"[{runtime}] the page showed no requests/s under load: {page_rates}")
    if not close_enough(page_rps, server_rps, 0.35, 20):
        fail(f"[{runtime}] page {page_rps:.0f} req/s vs server {server_rps:.0f} req/s (over 35 % apart)")
    # At rest, the totals must match the stats (which count this fetch of
    # them and any sample in flight: a few requests).
    time.sleep(2.5)
    f = figures(cdp)
    s = stats(host, port)
    print(
        f"  [{runtime}] page: requests {f['requests']}, connections {f['connections']}, 2xx {f['r2xx']}, "
        f"4xx {f['r4xx']}, viewers {f['viewers']}, errors {f['errors']}, {f['updates']} updates; "
        f"stats: requests {s['requests']}, connections {s['connections']['total']}, "
        f"2xx {s['responses']['2xx']}, 4xx {s['responses']['4xx']}, viewers {s['events']['viewers']}, "
        f"errors {sum(s['errors'].values())}"
    )
    checks = [
        ("requests", f["requests"], s["requests"], 5),
        ("connections", f["connections"], s["connections"]["total"], 5),
        ("2xx", f["r2xx"], s["responses"]["2xx"], 5),
        ("4xx", f["r4xx"], s["responses"]["4xx"], 0),
        ("viewers", f["viewers"], s["events"]["viewers"], 0),
        # The page has watched for less than a minute: all of them.
        ("errors + timeouts/min", f["errors"], sum(s["errors"].values()) + sum(s["timeouts"].values()), 0),
    ]
    for name, page, server, tol in checks:
        if page <= 0:
            fail(f"[{runtime}] the page shows {name} = {page}")
        if abs(page - server) > tol:
            fail(f"[{runtime}] {name}: page {page}, stats {server} (tolerance {tol})")
    if sum(f["worker_requests"]) != f["requests"]:
        fail(f"[{runtime}] per-worker requests {f['worker_requests']} do not add up to {f['requests']}")
    runtime_keys = [k for k in f["worker_keys"] if k.startswith("runtime.")]
    if len(runtime_keys) < 3:
        fail(f"[{runtime}] the workers table shows too few runtime counters: {f['worker_keys']}")
    if runtime != "fork" and not f["pool"]:
        fail(f"[{runtime}] the page shows no blocking pool")


def check_polling_fallback(cdp, host, port, runtime):
    """With no room for another viewer (the server was started with
    --max-event-viewers 0), the page polls /_httplite/stats instead."""
    cdp.navigate(f"http://{host}:{port}/_httplite/")
    cdp.wait("document.body.dataset.source === 'poll' && +document.body.dataset.updates >= 3", 15,
             f"[{runtime}] the page did not fall back to polling")
    f = figures(cdp)
    s = stats(host, port)
    if f["requests"] <= 0 or s["requests"] - f["requests"] > 5:
        fail(f"[{runtime}] polling: page requests {f['requests']}, stats {s['requests']}")
    print(f"  [{runtime}] 503 from /_httplite/events: the page polls ({f['updates']} updates)")


def check_listing(cdp, binary, shot):
    """The directory listing (--root with --list-dirs) in the browser."""
    root = tempfile.mkdtemp(prefix="httplite-browser-listing.")
    try:
        names = ["alpha.txt", "beta.html", "gamma"]
        for n in names[:2]:
            with open(os.path.join(root, n), "w") as f:
                f.write(n * 10)
        os.mkdir(os.path.join(root, names[2]))
        proc, host, port, (ahost, aport) = start_server(
            binary, "stackless", ["--root", root, "--list-dirs"], admin="127.0.0.1:0")
        try:
            cdp.navigate(f"http://{host}:{port}/")
            cdp.wait("document.querySelectorAll('td.name a').length >= 3", 10, "the listing did not render")
            shown = cdp.eval("[...document.querySelectorAll('td.name a')].map(a => a.textContent)")
            for n in names:
                if n not in shown and n + "/" not in shown:
                    fail(f"the listing lacks {n}: {shown}")
            # With a site, the dashboard is the admin listener's (its `/`),
            # and the public listener answers /_httplite/ as a missing file.
            c = http.client.HTTPConnection(host, port, timeout=10)
            c.request("GET", "/_httplite/")
            hidden = c.getresponse().status
            c.close()
            if hidden != 404:
                fail(f"the public listener answered /_httplite/ with {hidden}, not 404")
            cdp.navigate(f"http://{ahost}:{aport}/")
            cdp.wait("+document.body.dataset.updates >= 1", 10,
                     "the dashboard does not run on the admin listener")
            print(f"  listing: {shown}; the dashboard on the admin listener, 404 on the public one")
            if shot:
                cdp.navigate(f"http://{host}:{port}/")
                cdp.wait("document.querySelectorAll('td.name a').length >= 3", 10, "listing again")
                cdp.screenshot(shot, height=500)
                print(f"  listing screenshot: {shot}")
        finally:
            stop(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--chromium", default="chromium")
    ap.add_argument("--runtimes", default="stackless")
    ap.add_argument("--load-seconds", type=float, default=5)
    ap.add_argument("--screenshot", required=True)
    ap.add_argument("--fallback", action="store_true", help="also check the polling fallback on each runtime")
    args = ap.parse_args()
    runtimes = [r for r in args.runtimes.split(",") if r]
    for r in runtimes:
        if r not in RUNTIMES:
            fail(f"unknown runtime {r!r}")
    profile = tempfile.mkdtemp(prefix="httplite-browser-profile.")
    chromium = None
    try:
        chromium, ws = start_chromium(args.chromium, profile)
        cdp = Cdp(ws)
        for i, rt in enumerate(runtimes):
            proc, host, port = start_server(args.binary, rt, [])
            try:
                check_dashboard(cdp, host, port, rt, args.load_seconds, args.screenshot if i == 0 else None)
            finally:
                cdp.navigate("about:blank")
                stop(proc)
            if args.fallback:
                proc, host, port = start_server(args.binary, rt, ["--max-event-viewers", "0"])
                try:
                    check_polling_fallback(cdp, host, port, rt)
                finally:
                    cdp.navigate("about:blank")
                    stop(proc)
        base, ext = os.path.splitext(args.screenshot)
        check_listing(cdp, args.binary, base + "-listing" + ext)
    finally:
        stop(chromium)
        shutil.rmtree(profile, ignore_errors=True)
    print("browser-test: ok")


if __name__ == "__main__":
    main()
