#!/usr/bin/env python3
"""Keeps httplite's blocking pool busy with CPU-bound jobs, for
bench-jobs-latency.sh. Usage: job_feeder.py PORT CONNS KIND SIZE SECONDS

KIND `sha256`: jobs hash SIZE random bytes (the digest is checked).
KIND `spin` (test-only, HTTPLITE_TEST_ENDPOINTS=1): jobs hash SIZE MiB
generated from a tiny input, so the event loop carries almost nothing of
the load.

Each of CONNS threads keeps one job in flight on its own keep-alive
connection: submit, poll its state every 5 ms until done, check it, submit
the next. With CONNS above the pool's thread count the pool's queue is never
empty, so every pool thread computes all the time. Prints the number of jobs
done and checked."""
import hashlib
import os
import socket
import sys
import threading
import time

port, conns, kind, size, seconds = (
    int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
)
if kind == "sha256":
    body = os.urandom(size)
    expect = hashlib.sha256(body).hexdigest().encode()
else:
    body = str(size).encode()
    expect = f'"result":"hashed {size} MiB"'.encode()
submit = (
    f"POST /_httplite/jobs?type={kind} HTTP/1.1\r\nHost: bench\r\n"
    f"Content-Length: {len(body)}\r\n\r\n"
).encode() + body
end = time.time() + seconds
done = [0] * conns
errors = []


def response(sock, buf):
    """Reads one response (Content-Length framed); returns (head, body, rest)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed")
        rest += chunk
    return head, rest[:length], rest[length:]


def feed(i):
    try:
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        while time.time() < end:
            s.sendall(submit)
            head, _, buf = response(s, buf)
            if b" 503 " in head.split(b"\r\n")[0]:
                time.sleep(0.005)
                continue
            location = [l for l in head.split(b"\r\n") if l.lower().startswith(b"location:")]
            path = location[0].split(b":", 1)[1].strip()
            get = b"GET " + path + b" HTTP/1.1\r\nHost: bench\r\n\r\n"
            while True:
                s.sendall(get)
                _, job, buf = response(s, buf)
                if b'"state":"done"' in job:
                    if expect not in job:
                        errors.append(job[:200])
                    done[i] += 1
                    break
                if b'"state":"failed"' in job:
                    errors.append(job[:200])
                    break
                time.sleep(0.005)
    except Exception as e:  # reported, and the benchmark fails
        errors.append(repr(e))


threads = [threading.Thread(target=feed, args=(i,)) for i in range(conns)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sum(done))
if errors:
    print("errors:", errors[:3], file=sys.stderr)
    sys.exit(1)
