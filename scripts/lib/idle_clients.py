#!/usr/bin/env python3
"""Opens N keep-alive connections, sends one request on each, reads the
answer, then holds them all idle until stdin closes or HOLD seconds pass.
Prints "ready" once every connection has its answer.
Usage: idle_clients.py PORT N HOLD [PATH]"""
import selectors
import socket
import sys
import time

port, n, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
path = sys.argv[4] if len(sys.argv) > 4 else "/_httplite/plaintext"
req = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
socks = []
# Spread source addresses over 127.0.0.2-9 so ephemeral ports never run out.
for i in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((f"127.0.0.{2 + i % 8}", 0))
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    s.sendall(req)
    socks.append(s)
    # Read answers in batches so the server's backlog never overflows.
    if len(socks) % 500 == 0 or i == n - 1:
        for t in socks[-500:] if i != n - 1 else socks[(len(socks) - 1) // 500 * 500:]:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = t.recv(4096)
                if not chunk:
                    sys.exit("server closed a connection")
                data += chunk
print("ready", flush=True)
deadline = time.time() + hold
sel = selectors.DefaultSelector()
sel.register(sys.stdin, selectors.EVENT_READ)
while time.time() < deadline:
    if sel.select(timeout=0.5):
        break
for s in socks:
    s.close()
