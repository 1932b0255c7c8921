"""Real clients through the proxy: Python's http.client (keep-alive GET,
a POST with a body) and the websockets library's client (a text and a
binary message, then the close handshake). Prints one line per result.

Usage: python_clients.py BASE_URL CA_FILE   (CA_FILE "-" for plain HTTP)
"""

import http.client
import ssl
import sys
import urllib.parse

from websockets.sync.client import connect

base, ca = sys.argv[1], sys.argv[2]
url = urllib.parse.urlsplit(base)
ctx = ssl.create_default_context(cafile=ca) if url.scheme == "https" else None

if ctx:
    conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=10)
else:
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
conn.request("GET", "/app/fast")
r = conn.getresponse()
print("get", r.status, r.read().decode())
body = bytes(range(256)) * 400
conn.request("POST", "/app/echo", body=body)
r = conn.getresponse()
print("post", r.status, r.read() == body)
conn.close()

scheme = "wss" if ctx else "ws"
with connect(f"{scheme}://{url.hostname}:{url.port}/app/ws", ssl=ctx, open_timeout=10) as ws:
    ws.send("hello")
    print("text", ws.recv(timeout=10))
    blob = bytes(range(256)) * 300
    ws.send(blob)
    print("binary", ws.recv(timeout=10) == blob)
print("closed")
