#!/usr/bin/env python3
"""Head-of-line test: open N keep-alive connections that each send one
request and then sit idle (those the server does not answer at once stay
waiting), then time a new client's request from connect() to its whole
answer. Prints "LATENCY_MS ANSWERED_BEFORE" (how many of the N had their
answer before the new client connected).
Usage: hol_client.py PORT N [SETTLE_SECONDS]"""
import select
import socket
import sys
import time

port, n = int(sys.argv[1]), int(sys.argv[2])
settle = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
req = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
held = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(req)
    held.append(s)
# Let the server answer whoever it can; count them.
time.sleep(settle)
answered = sum(1 for s in held if select.select([s], [], [], 0)[0])
t0 = time.perf_counter()
c = socket.create_connection(("127.0.0.1", port), timeout=120)
c.sendall(b"GET /_httplite/plaintext HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
data = b""
while b"Hello" not in data:
    chunk = c.recv(4096)
    if not chunk:
        break
    data += chunk
t1 = time.perf_counter()
status = data.split(b"\r\n", 1)[0].decode(errors="replace")
print(f"{(t1 - t0) * 1000:.1f} {answered} {status!r}")
for s in held:
    s.close()
