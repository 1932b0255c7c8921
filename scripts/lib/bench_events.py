#!/usr/bin/env python3
"""What a dashboard viewer costs the server, per runtime: N viewers on
/_httplite/events (one event a second) against N clients polling
/_httplite/stats once a second on keep-alive connections, for D seconds
each. Prints the server's CPU time per viewer-second, its memory per
viewer (PSS of the server and its children, so that fork's processes
are not counted twice for shared pages), its threads and processes.
Run by scripts/bench-events.sh. Loopback only, bounded in count and time.
"""

import argparse
import os
import re
import selectors
import socket
import subprocess
import sys
import time



def procs(pid):
    """The server and its live children (fork's connection processes)."""
    out = [pid]
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(d))
            except OSError:
                pass
    return out


def cpu_seconds(pid):
    """CPU time of every thread of the server and its live children, from
    /proc/*/task/*/schedstat (nanoseconds; /proc/*/stat counts 10 ms
    ticks, too coarse for a few µs per viewer-second)."""
    total = 0
    for p in procs(pid):
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/schedstat") as f:
                    total += int(f.read().split()[0])
        except OSError:
            pass
    return total / 1e9


def memory(pid):
    """(PSS in KiB of the server and its children, threads, processes)."""
    pss, threads, ps = 0, 0, procs(pid)
    for p in ps:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                m = re.search(r"^Pss:\s+(\d+) kB", f.read(), re.M)
                pss += int(m.group(1)) if m else 0
            with open(f"/proc/{p}/status") as f:
                threads += int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))
        except OSError:
            pass
    return pss, threads, len(ps)


def start(binary, runtime, n):
    args = [binary, "--bind", "127.0.0.1:0", "--runtime", runtime, "--max-event-viewers", str(n + 10)]
    if runtime != "fork":
        args += ["--workers", "2"]
    if runtime == "threadpool":
        args += ["--threadpool-size", str(n + 16)]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline().decode()
    m = re.search(r"http://([0-9.]+):(\d+)", line)
    if not m:
        p.kill()
        sys.exit(f"bench-events: no start-up line: {line!r}")
    return p, m.group(1), int(m.group(2))


def run_viewers(host, port, n, seconds):
    """N streams for `seconds`; returns (events received, bytes)."""
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, port))
        s.sendall(b"GET /_httplite/events HTTP/1.1\r\nHost: b\r\n\r\n")
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        socks.append(s)
    events, nbytes = 0, 0
    end = time.time() + seconds
    while time.time() < end:
        for key, _ in sel.select(timeout=0.2):
            try:
                data = key.fileobj.recv(65536)
            except BlockingIOError:
                continue
            nbytes += len(data)
            events += data.count(b"\ndata: ")
    return socks, events, nbytes


def run_pollers(host, port, n, seconds):
    """N keep-alive clients, each GET /_httplite/stats once a second."""
    socks = [socket.create_connection((host, port)) for _ in range(n)]
    for s in socks:
        s.settimeout(5)
    req = b"GET /_httplite/stats HTTP/1.1\r\nHost: b\r\n\r\n"
    polls, nbytes = 0, 0
    end = time.time() + seconds
    while time.time() < end:
        tick = time.time()
        for s in socks:
            s.sendall(req)
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += s.recv(65536)
            head, body = buf.split(b"\r\n\r\n", 1)
            length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
            while len(body) < length:
                body += s.recv(65536)
            polls += 1
            nbytes += len(head) + 4 + len(body)
        time.sleep(max(0.0, 1.0 - (time.time() - tick)))
    return socks, polls, nbytes


def measure(binary, runtime, n, seconds, kind):
    p, host, port = start(binary, runtime, n)
    try:
        time.sleep(0.5)
        mem0 = memory(p.pid)
        cpu0 = cpu_seconds(p.pid)
        t0 = time.time()
        run = run_viewers if kind == "sse" else run_pollers
        socks, count, nbytes = run(host, port, n, seconds)
        took = time.time() - t0
        cpu = cpu_seconds(p.pid) - cpu0
        mem1 = memory(p.pid)
        for s in socks:
            s.close()
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    viewer_seconds = n * took
    return {
        "cpu_us_per_viewer_s": cpu * 1e6 / viewer_seconds,
        "kib_per_viewer": (mem1[0] - mem0[0]) / n,
        "threads": mem1[1],
        "processes": mem1[2],
        "updates": count,
        "bytes_per_update": nbytes / max(count, 1),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--runtimes", default="stackless,stackful,threads,threadpool,fork,uring")
    ap.add_argument("--viewers", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=10)
    args = ap.parse_args()
    if not 1 <= args.viewers <= 500:
        sys.exit("bench-events: --viewers is 1..500")
    print(f"{args.viewers} viewers, {args.seconds:.0f} s each way, one update a second per viewer")
    print(f"{'runtime':<11} {'feed':<5} {'CPU µs/viewer-s':>16} {'KiB/viewer':>11} {'threads':>8} "
          f"{'procs':>6} {'updates':>8} {'B/update':>9}")
    for rt in args.runtimes.split(","):
        for kind in ("sse", "poll"):
            r = measure(args.binary, rt, args.viewers, args.seconds, kind)
            print(f"{rt:<11} {kind:<5} {r['cpu_us_per_viewer_s']:>16.1f} {r['kib_per_viewer']:>11.1f} "
                  f"{r['threads']:>8} {r['processes']:>6} {r['updates']:>8} {r['bytes_per_update']:>9.0f}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
