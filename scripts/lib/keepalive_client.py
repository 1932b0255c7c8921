#!/usr/bin/env python3
"""Sends K plaintext requests over one keep-alive connection and checks every
answer. Usage: keepalive_client.py PORT K DEPTH [PATH [HEADER]]
          or: keepalive_client.py PORT K DEPTH --head FILE [PORT_SUFFIX]

DEPTH 1 sends one request at a time; DEPTH 16 writes 16 pipelined requests
per send and waits for their 16 answers. With a PATH (and optionally one
extra header line, e.g. "If-None-Match: ..."), every answer is counted by
its status line instead of the plaintext body.

With --head, the request is FILE's head (see scripts/heads/README.md):
its lines joined with CRLF, `{port}` replaced by PORT_SUFFIX (empty, or
e.g. ":8080"), then the empty line; every answer is checked for the
plaintext body. FILE may be several files joined with commas: the
requests then take their heads in turn (a browser fetching a page and
its images on one connection)."""
import socket
import sys
import time

port, k, depth = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
if len(sys.argv) > 4 and sys.argv[4] == "--head":
    suffix = sys.argv[6] if len(sys.argv) > 6 else ""
    reqs = []
    for name in sys.argv[5].split(","):
        with open(name, encoding="utf-8") as f:
            lines = [line.rstrip("\r\n") for line in f if line.strip()]
        reqs.append(("\r\n".join(lines).replace("{port}", suffix) + "\r\n\r\n").encode())
    marker = b"\r\n\r\nHello, World!"
else:
    path = sys.argv[4] if len(sys.argv) > 4 else "/_httplite/plaintext"
    header = f"{sys.argv[5]}\r\n" if len(sys.argv) > 5 else ""
    reqs = [f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{header}\r\n".encode()]
    marker = b"\r\n\r\nHello, World!" if len(sys.argv) <= 4 else b"HTTP/1.1 "

deadline = time.time() + 30
while True:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        break
    except OSError:
        if time.time() > deadline:
            raise
        time.sleep(0.2)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
done = 0
buf = b""
while done < k:
    n = min(depth, k - done)
    s.sendall(b"".join(reqs[(done + i) % len(reqs)] for i in range(n)))
    got = 0
    while got < n:
        data = s.recv(1 << 16)
        if not data:
            sys.exit(f"server closed after {done + got} responses")
        buf += data
        c = buf.count(marker)
        if c:
            got += c
            buf = buf[buf.rindex(marker) + len(marker):]
    if got != n:
        sys.exit(f"expected {n} responses, got {got}")
    done += n
s.close()
print(f"{done} responses OK")
