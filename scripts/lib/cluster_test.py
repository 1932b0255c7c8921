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

Usage: cluster_test.py BIN WORKDIR SECONDS
"""

import http.client
import os
import random
import signal
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

step = 0
lock = threading.Lock()
counts = {s: {"sent": 0, "ok": 0, "failed": 0, "conn_errors": 0} for s in range(len(STEPS))}
stop = threading.Event()


def count(key):
    with lock:
        counts[step][key] += 1


def check(resp, body, path):
    if resp.status != 200:
        return False
    if path == "/_httplite/plaintext":
        return body == b"Hello, World!"
    return body == STATIC


def load(seed):
    rng = random.Random(seed)
    conn = None
    while not stop.is_set():
        path = "/_httplite/plaintext" if rng.random() < 0.7 else "/file.txt"
        keep = rng.random() < 0.6
        count("sent")
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", FRONT, timeout=10)
            conn.request("GET", path, headers={} if keep else {"Connection": "close"})
            resp = conn.getresponse()
            body = resp.read()
            count("ok" if check(resp, body, path) else "failed")
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
             "--access-log", self.log, "--drain-delay", "2s", "--shutdown-timeout", "5s",
             "--pool-priority", "normal"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True)
        self.pid = p.pid
        self.proc = p
        wait_health(self.port)

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


def wait_health(port, within=15):
    end = time.time() + within
    while time.time() < end:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/_httplite/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"port {port}: not healthy")


def main():
    global step
    with open(os.path.join(WORK, "file.txt"), "wb") as f:
        f.write(STATIC)
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
    logged = 0
    for inst in insts:
        for name in (inst.log, inst.log + ".1"):
            if os.path.exists(name):
                with open(name) as f:
                    logged += sum(1 for l in f if "/_httplite/health" not in l)
    print(f"{'step':<24}{'sent':>8}{'verified':>10}{'failed':>8}{'conn err':>10}")
    bad = 0
    for s, name in enumerate(STEPS):
        c = counts[s]
        print(f"{name:<24}{c['sent']:>8}{c['ok']:>10}{c['failed']:>8}{c['conn_errors']:>10}")
        if s in (1, 2, 3):
            bad += c["failed"] + c["conn_errors"]
    total_ok = sum(c["ok"] for c in counts.values())
    print(f"verified responses: {total_ok}; access-log lines (all instances, rotated "
          f"included, health checks excluded): {logged}")
    print("steps 1-3: " + ("zero failed requests, zero connection errors" if bad == 0
                           else f"{bad} failures or connection errors"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
