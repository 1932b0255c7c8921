#!/usr/bin/env python3
"""Time from connect() to the first byte of the answer, for N new
connections one after another (each: connect, send one GET with
Connection: close, read one byte, close). Prints "MEDIAN_US P99_US" in
microseconds, after WARMUP connections that are not counted.
Usage: first_byte.py PORT N [WARMUP]"""
import socket
import sys
import time

port, n = int(sys.argv[1]), int(sys.argv[2])
warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 100
req = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
times = []
for i in range(warmup + n):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # Spread source addresses over 127.0.0.2-9 so ephemeral ports never run out.
    s.bind((f"127.0.0.{2 + i % 8}", 0))
    s.settimeout(10)
    t0 = time.perf_counter_ns()
    s.connect(("127.0.0.1", port))
    s.sendall(req)
    if not s.recv(1):
        sys.exit("server closed without answering")
    t1 = time.perf_counter_ns()
    s.close()
    if i >= warmup:
        times.append((t1 - t0) / 1000)
times.sort()
median = times[len(times) // 2]
p99 = times[min(len(times) - 1, (len(times) * 99) // 100)]
print(f"{median:.0f} {p99:.0f}")
