#!/usr/bin/env python3
"""Three httplite instances behind HAProxy, under a checked load, through
the operations of docs/deploy.md; run by scripts/cluster-test.sh.

Steps, each timed while the load runs:
  1 rolling upgrade: SIGUSR2 to each instance in turn
  2 SIGTERM one instance (drain delay: health 503, HAProxy takes it out),
    then start it again
  3 logrotate: rename every access log, SIGHUP to all three
  4 SIGKILL one instance (requests in flight there may fail), start it again

Every response is checked (status and body). Prints per step: requests
sent, verified, failed, connection errors. Exit 1 if steps 1-3 saw any
failure or connection error.

HAProxy speaks PROXY protocol v2 to the instances (--proxy-protocol
--trusted-proxy 127.0.0.1/32); the load connects to HAProxy from
CLIENT_SRC (127.0.0.2), so the access logs must show that address for
every request, and HAProxy's own (127.0.0.1: LOCAL headers) for its health
checks. Every request carries an id (?id=...); afterwards each verified
request must be in the logs exactly once. The one allowance: the SIGKILLed
instance loses the lines it had not flushed yet (its log buffer is flushed
every second), so step 4 reports its missing lines separately. Exit 1 on a
missing or repeated line outside step 4, or on a wrong address.

Usage: cluster_test.py BIN WORKDIR SECONDS
"""

import collections
import http.client
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

BIN, WORK, SECONDS = sys.argv[1], sys.argv[2], float(sys.argv[3])
FRONT = 18180
PORTS = [18181, 18182, 18183]
STEPS = ["warm-up", "1 rolling upgrade", "2 SIGTERM + restart", "3 logrotate + SIGHUP",
         "4 SIGKILL + restart", "cool-down"]
STATIC = b"static file body\n" * 64

CLIENT_SRC = "127.0.0.2"
# A PROXY protocol v2 LOCAL header: what HAProxy's checks send, and what
# this script's own checks of an instance send.
PROXY_LOCAL = b"\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00"

step = 0
lock = threading.Lock()
counts = {s: {"sent": 0, "ok": 0, "failed": 0, "conn_errors": 0} for s in range(len(STEPS))}
# The ids of the verified requests, by the step in which they were sent.
verified = {s: set() for s in range(len(STEPS))}
stop = threading.Event()


def count(key):
    with lock:
        counts[step][key] += 1


def check(resp, body, path):
    if resp.status != 200:
        return False
    if path == "/hello.txt":
        return body == b"Hello, World!"
    return body == STATIC


def load(seed):
    rng = random.Random(seed)
    conn = None
    n = 0
    while not stop.is_set():
        path = "/hello.txt" if rng.random() < 0.7 else "/file.txt"
        keep = rng.random() < 0.6
        n += 1
        rid = f"{seed}-{n}"
        sent_in = step
        count("sent")
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", FRONT, timeout=10,
                                                  source_address=(CLIENT_SRC, 0))
            conn.request("GET", f"{path}?id={rid}",
                         headers={} if keep else {"Connection": "close"})
            resp = conn.getresponse()
            body = resp.read()
            good = check(resp, body, path)
            count("ok" if good else "failed")
            if good:
                with lock:
                    verified[sent_in].add(rid)
            if not keep or resp.will_close:
                conn.close()
                conn = None
        except (ConnectionRefusedError, ConnectionResetError, http.client.RemoteDisconnected,
                BrokenPipeError) as e:
            count("conn_errors")
            if conn:
                conn.close()
            conn = None
        except Exception:
            count("failed")
            if conn:
                conn.close()
            conn = None


class Instance:
    def __init__(self, i):
        self.i = i
        self.port = PORTS[i]
        self.log = os.path.join(WORK, f"access-{i}.log")
        self.err = os.path.join(WORK, f"stderr-{i}.txt")
        self.pid = None

    def start(self):
        err = open(self.err, "a")
        p = subprocess.Popen(
            [BIN, "--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--root", WORK,
             "--health", "/healthz",
             "--proxy-protocol", "--trusted-proxy", "127.0.0.1/32",
             "--access-log", self.log, "--drain-delay", "2s", "--shutdown-timeout", "5s",
             "--pool-priority", "normal"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True)
        self.pid = p.pid
        self.proc = p
        wait_health(self.port, proxy=True)

    def alive(self, pid):
        try:
            with open(f"/proc/{pid}/status") as f:
                return "State:\tZ" not in f.read()
        except FileNotFoundError:
            return False

    def wait_gone(self, pid, within=20):
        end = time.time() + within
        while time.time() < end:
            if hasattr(self, "proc") and self.proc.pid == pid:
                if self.proc.poll() is not None:
                    return True
            elif not self.alive(pid):
                return True
            time.sleep(0.05)
        raise SystemExit(f"instance {self.i}: pid {pid} did not exit")

    def upgrade(self):
        old = self.pid
        before = open(self.err).read().count("is ready")
        os.kill(old, signal.SIGUSR2)
        end = time.time() + 20
        while time.time() < end:
            text = open(self.err).read()
            if text.count("is ready") > before:
                new = text.split("upgrade: new process ")[-1].split(" ")[0]
                self.pid = int(new)
                self.wait_gone(old)
                return
            if "upgrade failed" in text:
                raise SystemExit(f"instance {self.i}: {text}")
            time.sleep(0.05)
        raise SystemExit(f"instance {self.i}: no upgrade")


def health_ok(port, proxy):
    """One health check; an instance (proxy=True) wants a PROXY header first."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall((PROXY_LOCAL if proxy else b"") +
                      b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
            return answer.startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def wait_health(port, within=15, proxy=False):
    end = time.time() + within
    while time.time() < end:
        if health_ok(port, proxy):
            return
        time.sleep(0.05)
    raise SystemExit(f"port {port}: not healthy")


def check_logs(insts):
    """Reads every access log: (request ids and their counts, lines, health
    lines, lines with the wrong address)."""
    ids = collections.Counter()
    lines = health = wrong = 0
    for inst in insts:
        for name in (inst.log, inst.log + ".1"):
            if not os.path.exists(name):
                continue
            with open(name) as f:
                for line in f:
                    lines += 1
                    host = line.split(" ", 1)[0]
                    target = line.split('"')[1].split(" ")[1] if '"' in line else ""
                    if target.startswith("/healthz"):
                        health += 1
                        # LOCAL headers: the socket's peer, HAProxy (or us).
                        wrong += host != "127.0.0.1"
                        continue
                    wrong += host != CLIENT_SRC
                    ids[target.split("?id=")[-1]] += 1
    return ids, lines, health, wrong


def main():
    global step, CLIENT_SRC
    try:
        with socket.socket() as s:
            s.bind((CLIENT_SRC, 0))
    except OSError as e:
        # Without a second loopback address the PROXY header's client is
        # HAProxy's address again: the check of addresses proves less.
        print(f"cannot bind {CLIENT_SRC} ({e}); the load connects from 127.0.0.1")
        CLIENT_SRC = "127.0.0.1"
    with open(os.path.join(WORK, "file.txt"), "wb") as f:
        f.write(STATIC)
    with open(os.path.join(WORK, "hello.txt"), "wb") as f:
        f.write(b"Hello, World!")
    insts = [Instance(i) for i in range(3)]
    for inst in insts:
        inst.start()
    wait_health(FRONT)
    time.sleep(2)  # HAProxy's checks see all three up
    threads = [threading.Thread(target=load, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    phase = SECONDS / 6
    time.sleep(phase)
    step = 1
    for inst in insts:
        inst.upgrade()
        time.sleep(phase / 3)
    step = 2
    victim = insts[0]
    os.kill(victim.pid, signal.SIGTERM)
    victim.wait_gone(victim.pid)
    victim.start()
    time.sleep(max(phase, 2))
    step = 3
    for inst in insts:
        os.rename(inst.log, inst.log + ".1")
    for inst in insts:
        os.kill(inst.pid, signal.SIGHUP)
    time.sleep(phase)
    step = 4
    # Every line of the requests before this step is flushed (at most 1 s
    # late) before the kill: the lines the kill loses are this step's.
    time.sleep(2)
    victim = insts[1]
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait_gone(victim.pid)
    time.sleep(1)
    victim.start()
    time.sleep(phase)
    step = 5
    time.sleep(1)
    stop.set()
    for t in threads:
        t.join()
    for inst in insts:
        os.kill(inst.pid, signal.SIGTERM)
    for inst in insts:
        inst.wait_gone(inst.pid)
    ids, lines, health, wrong = check_logs(insts)
    print(f"{'step':<24}{'sent':>8}{'verified':>10}{'failed':>8}{'conn err':>10}"
          f"{'logged 1x':>11}{'missing':>9}{'repeated':>10}")
    bad = 0
    log_bad = 0
    for s, name in enumerate(STEPS):
        c = counts[s]
        once = sum(1 for r in verified[s] if ids.get(r) == 1)
        missing = sum(1 for r in verified[s] if r not in ids)
        repeated = sum(1 for r in verified[s] if ids.get(r, 0) > 1)
        print(f"{name:<24}{c['sent']:>8}{c['ok']:>10}{c['failed']:>8}{c['conn_errors']:>10}"
              f"{once:>11}{missing:>9}{repeated:>10}")
        if s in (1, 2, 3):
            bad += c["failed"] + c["conn_errors"]
        log_bad += repeated + (missing if s != 4 else 0)
    all_verified = set().union(*verified.values())
    unverified = sum(n for r, n in ids.items() if r not in all_verified)
    total_ok = sum(c["ok"] for c in counts.values())
    print(f"access logs: {lines} lines = {health} health checks + {lines - health} requests; "
          f"{total_ok} verified responses; {unverified} logged requests not verified "
          f"(answered, but the client saw a failure); {wrong} lines with another address "
          f"than {CLIENT_SRC} (requests) or 127.0.0.1 (health checks)")
    print("(sent, failed, conn err: by the step a request was sent in; verified: by the step its "
          "answer came in; logged 1x, missing, repeated: the verified requests sent in the step)")
    print("steps 1-3: " + ("zero failed requests, zero connection errors" if bad == 0
                           else f"{bad} failures or connection errors"))
    print("access logs: " + ("every verified request exactly once (step 4: the lines the "
                             "SIGKILL lost are counted missing), every address the client's"
                             if log_bad == 0 and wrong == 0 else
                             f"{log_bad} missing or repeated lines outside step 4, "
                             f"{wrong} wrong addresses"))
    bad += log_bad + wrong
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
