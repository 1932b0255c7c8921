#!/usr/bin/env python3
"""Keeps httplite's blocking pool busy with CPU-bound jobs, for
bench-jobs-latency.sh. Usage: job_feeder.py PORT CONNS BODY_BYTES SECONDS

Each of CONNS threads keeps one `sha256` job of BODY_BYTES in flight on its
own keep-alive connection: submit, poll its state every 2 ms until done,
check the digest, submit the next. With CONNS above the pool's thread count
the pool's queue is never empty, so every pool thread computes all the time.
Prints the number of jobs done and checked."""
import hashlib
import os
import socket
import sys
import threading
import time

port, conns, size, seconds = (int(a) for a in sys.argv[1:5])
body = os.urandom(size)
digest = hashlib.sha256(body).hexdigest().encode()
submit = (
    f"POST /_httplite/jobs?type=sha256 HTTP/1.1\r\nHost: bench\r\n"
    f"Content-Length: {size}\r\n\r\n"
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
                    if digest not in job:
                        errors.append(job[:200])
                    done[i] += 1
                    break
                if b'"state":"failed"' in job:
                    errors.append(job[:200])
                    break
                time.sleep(0.002)
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
