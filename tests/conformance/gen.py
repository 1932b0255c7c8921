#!/usr/bin/env python3
"""Seeded generator of request heads for the differential conformance test.

Prints one head per line: `<class>\t<mutation offset or -1>\t<head as hex>`.
Three kinds of heads, all reproducible from --seed:
  client-*      valid-looking heads in the shapes real clients send (curl,
                wget, browsers, POST with Content-Length or chunked, HTTP/1.0
                without Host, absolute-form, OPTIONS *, CONNECT, odd queries);
  <op>@<region> one mutation of a client head: op is insert-{SP,HTAB,CR,LF,
                NUL,DEL,HIGH}, delete, dup, caseflip or truncate; region is a
                part of the request line (method, sp1, target, sp2, version,
                eol), the Host value (host) or another header's name/value
                (hname, hvalue); the offset is where the mutation happened;
  targeted      hand-picked edge cases (TARGETED below), class named by case.
Usage: gen.py [--seed N] [--count N]   (count >= number of targeted cases)
"""
import argparse
import random

CRLF = b"\r\n"
UA = {
    "curl": b"curl/8.5.0",
    "wget": b"Wget/1.21.4",
    "chrome": b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 "
    b"(KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
    "firefox": b"Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
}
HOSTS = [b"localhost", b"127.0.0.1", b"example.com", b"api.example.org", b"[::1]",
         b"xn--bcher-kva.example", b"a-b.c_d.test", b"10.0.0.7"]
SEG = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@"
ODD_QUERY = b"[]{}|^"


def seg(r, n=None):
    return bytes(r.choice(SEG) for _ in range(n or r.randint(1, 10)))


def path(r, pct=False):
    segs = [seg(r) for _ in range(r.randint(0, 4))]
    if pct:
        segs.append(b"".join(b"%%%02X" % r.randint(0, 255) for _ in range(r.randint(1, 3))))
    p = b"/" + b"/".join(segs)
    if r.random() < 0.4:
        p += b"?" + b"&".join(seg(r) + b"=" + seg(r) for _ in range(r.randint(1, 3)))
    return p


def host(r):
    h = r.choice(HOSTS)
    return h + b":%d" % r.choice([80, 443, 8080, 65535]) if r.random() < 0.5 else h


def browser(r, ua):
    return [(b"Host", host(r)), (b"User-Agent", UA[ua]),
            (b"Accept", b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
            (b"Accept-Language", b"en-US,en;q=0.5"), (b"Accept-Encoding", b"gzip, deflate, br"),
            (b"Connection", b"keep-alive"), (b"Upgrade-Insecure-Requests", b"1"),
            (b"Sec-Fetch-Dest", b"document"), (b"Sec-Fetch-Mode", b"navigate"),
            (b"Sec-Fetch-Site", b"none"), (b"Sec-Fetch-User", b"?1"),
            (b"Cookie", b"sid=" + seg(r, 24) + b"; theme=dark"),
            (b"If-None-Match", b'W/"' + seg(r, 8) + b'"'), (b"Cache-Control", b"max-age=0")]


def client(r, kind):
    """(class, method, target, version, headers) in the shape of a real client."""
    h = host(r)
    if kind == "curl":
        return "GET", path(r), "1.1", [(b"Host", h), (b"User-Agent", UA["curl"]), (b"Accept", b"*/*")]
    if kind == "wget":
        return "GET", path(r), "1.1", [(b"User-Agent", UA["wget"]), (b"Accept", b"*/*"),
                                       (b"Accept-Encoding", b"identity"), (b"Host", h),
                                       (b"Connection", b"Keep-Alive")]
    if kind in ("chrome", "firefox"):
        return "GET", path(r), "1.1", browser(r, kind)
    if kind == "post-cl":
        return "POST", path(r), "1.1", [(b"Host", h), (b"User-Agent", UA["curl"]),
                                        (b"Content-Type", b"application/json"),
                                        (b"Content-Length", b"%d" % r.randint(0, 99999))]
    if kind == "post-chunked":
        return "POST", path(r), "1.1", [(b"Host", h), (b"Transfer-Encoding", b"chunked"),
                                        (b"Content-Type", b"text/plain")]
    if kind == "http10":
        return "GET", path(r), "1.0", [(b"User-Agent", b"ApacheBench/2.3"), (b"Accept", b"*/*")]
    if kind == "absolute":
        return r.choice(["GET", "HEAD", "POST"]), b"http://" + h + path(r), "1.1", [
            (b"Host", h), (b"Proxy-Connection", b"keep-alive"), (b"User-Agent", UA["curl"])]
    if kind == "options-star":
        return "OPTIONS", b"*", "1.1", [(b"Host", h), (b"User-Agent", UA["curl"])]
    if kind == "connect":
        a = r.choice(HOSTS) + b":443"
        return "CONNECT", a, "1.1", [(b"Host", a), (b"User-Agent", UA["curl"])]
    if kind == "odd-query":
        q = bytes(r.choice(ODD_QUERY + SEG) for _ in range(r.randint(2, 12)))
        return "GET", path(r) + b"?q=" + q, "1.1", [(b"Host", h), (b"User-Agent", UA["curl"])]
    if kind == "percent":
        return "GET", path(r, pct=True), "1.1", [(b"Host", h), (b"User-Agent", UA["wget"])]
    if kind == "methods":
        return r.choice(["HEAD", "PUT", "DELETE", "PATCH", "TRACE", "OPTIONS"]), path(r), "1.1", [
            (b"Host", h), (b"Content-Length", b"0")]
    raise ValueError(kind)


CLIENTS = ["curl", "wget", "chrome", "firefox", "post-cl", "post-chunked", "http10",
           "absolute", "options-star", "connect", "odd-query", "percent", "methods"]


def render(method, target, version, headers):
    """Head bytes and the [start, end) of each region."""
    reg, out = {}, bytearray()

    def put(name, data):
        reg[name] = (len(out), len(out) + len(data))
        out.extend(data)

    put("method", method.encode())
    put("sp1", b" ")
    put("target", target)
    put("sp2", b" ")
    put("version", b"HTTP/" + version.encode())
    put("eol", CRLF)
    others = [i for i, (n, _) in enumerate(headers) if n.lower() != b"host"]
    pick = others[len(out) % len(others)] if others else None
    for i, (n, v) in enumerate(headers):
        if n.lower() == b"host" and "host" not in reg:
            out.extend(n + b": ")
            put("host", v)
        elif i == pick:
            put("hname", n)
            out.extend(b": ")
            put("hvalue", v)
        else:
            out.extend(n + b": " + v)
        out.extend(CRLF)
    out.extend(CRLF)
    return bytes(out), reg


INSERTS = {"SP": b" ", "HTAB": b"\t", "CR": b"\r", "LF": b"\n", "NUL": b"\0", "DEL": b"\x7f", "HIGH": None}
OPS = ["insert-" + k for k in INSERTS] + ["delete", "dup", "caseflip", "truncate"]
REGIONS = ["method", "sp1", "target", "sp2", "version", "eol", "host", "hname", "hvalue"]


def mutate(r, head, reg, op, region):
    """The mutated head and the offset, or None if op cannot apply here."""
    if region not in reg:
        return None
    s, e = reg[region]
    if op.startswith("insert-"):
        at = r.randint(s, e)
        b = INSERTS[op[7:]] or bytes([r.randint(0x80, 0xFF)])
        return head[:at] + b + head[at:], at
    if op == "caseflip":
        letters = [i for i in range(s, e) if chr(head[i]).isalpha()]
        if not letters:
            return None
        at = r.choice(letters)
        return head[:at] + chr(head[at]).swapcase().encode() + head[at + 1:], at
    if e == s:
        return None
    at = r.randrange(s, e)
    if op == "delete":
        return head[:at] + head[at + 1:], at
    if op == "dup":
        return head[:at] + head[at:at + 1] + head[at:], at
    return (head[:at], at) if at > 0 else None  # truncate, never to nothing


def req(line, *headers, host=b"a.example"):
    hs = ([b"Host: " + host] if host is not None else []) + list(headers)
    return line + CRLF + b"".join(h + CRLF for h in hs) + CRLF


TARGETED = [
    ("sep-multi-SP@method-target", req(b"GET  / HTTP/1.1")),
    ("sep-multi-SP@target-version", req(b"GET /  HTTP/1.1")),
    ("sep-HTAB@method-target", req(b"GET\t/ HTTP/1.1")),
    ("sep-HTAB@target-version", req(b"GET /\tHTTP/1.1")),
    ("sep-leading-SP", req(b" GET / HTTP/1.1")),
    ("sep-trailing-SP", req(b"GET / HTTP/1.1 ")),
    ("space-in-target", req(b"GET /a b HTTP/1.1")),
    ("space-in-target", req(b"GET /_httplite/plaintext x HTTP/1.1")),
    ("version-garbled", req(b"GET / HTTP/1.")),
    ("version-garbled", req(b"GET / HTTP/1")),
    ("version-garbled", req(b"GET / HTTP/")),
    ("version-garbled", req(b"GET / HTTP/1.1.1")),
    ("version-garbled", req(b"GET / HTTP/11")),
    ("version-garbled", req(b"GET / HTTP/1.a")),
    ("version-garbled", req(b"GET / HTTP/1.10")),
    ("version-missing", req(b"GET /")),
    ("version-1.x", req(b"GET / HTTP/1.2")),
    ("version-1.x", req(b"GET / HTTP/1.9")),
    ("version-major", req(b"GET / HTTP/2.0")),
    ("version-major", req(b"GET / HTTP/3.0")),
    ("version-major", req(b"GET / HTTP/0.9")),
    ("version-major", req(b"GET / HTTP/9.9")),
    ("version-case", req(b"GET / http/1.1")),
    ("version-case", req(b"GET / Http/1.1")),
    ("target-query-only", req(b"GET ?x HTTP/1.1")),
    ("target-relative", req(b"GET x HTTP/1.1")),
    ("target-relative", req(b"GET x/y HTTP/1.1")),
    ("target-bad-absolute", req(b"GET http:/x HTTP/1.1")),
    ("target-bad-absolute", req(b"GET http:// HTTP/1.1")),
    ("target-bad-absolute", req(b"GET http://a:99999/ HTTP/1.1")),
    ("target-empty", req(b"GET  HTTP/1.1")),
    ("target-star-not-OPTIONS", req(b"GET * HTTP/1.1")),
    ("target-star-not-OPTIONS", req(b"POST * HTTP/1.1", b"Content-Length: 0")),
    ("target-star-suffix", req(b"OPTIONS *x HTTP/1.1")),
    ("target-authority-not-CONNECT", req(b"GET a.example:80 HTTP/1.1")),
    ("target-authority-not-CONNECT", req(b"OPTIONS a.example:443 HTTP/1.1")),
    ("connect-origin-form", req(b"CONNECT / HTTP/1.1")),
    ("connect-no-port", req(b"CONNECT a.example HTTP/1.1")),
    ("connect-absolute", req(b"CONNECT http://a.example:443/ HTTP/1.1")),
    ("target-fragment", req(b"GET /a#b HTTP/1.1")),
    ("target-fragment", req(b"GET /a?b#c HTTP/1.1")),
    ("target-absolute-https", req(b"GET https://a.example/x HTTP/1.1")),
    ("target-absolute-no-path", req(b"GET http://a.example HTTP/1.1")),
    ("target-absolute-no-path", req(b"GET http://a.example?q HTTP/1.1")),
    ("target-absolute-userinfo", req(b"GET http://u:p@a.example/ HTTP/1.1")),
    ("target-absolute-other-scheme", req(b"GET ftp://a.example/ HTTP/1.1")),
    ("target-absolute-host-differs", req(b"GET http://b.example/ HTTP/1.1")),
    ("target-pct-bad", req(b"GET /%zz HTTP/1.1")),
    ("target-pct-bad", req(b"GET /%4 HTTP/1.1")),
    ("target-pct-NUL", req(b"GET /a%00b HTTP/1.1")),
    ("target-high-byte", req(b"GET /caf\xc3\xa9 HTTP/1.1")),
    ("target-odd-chars", req(b'GET /a"b<c>d HTTP/1.1')),
    ("target-odd-chars", req(b"GET /a\\b HTTP/1.1")),
    ("target-odd-chars", req(b"GET /a`b HTTP/1.1")),
    ("host-missing", req(b"GET / HTTP/1.1", b"Accept: */*", host=None)),
    ("host-missing-1.0", req(b"GET / HTTP/1.0", host=None)),
    ("dup-host", req(b"GET / HTTP/1.1", b"Host: a.example")),
    ("dup-host", req(b"GET / HTTP/1.1", b"Host: b.example")),
    ("dup-host", req(b"GET / HTTP/1.0", b"host: b.example")),
    ("host-empty", req(b"GET / HTTP/1.1", host=b"")),
    ("host-space", req(b"GET / HTTP/1.1", host=b"bad host")),
    ("host-port-too-big", req(b"GET / HTTP/1.1", host=b"a:99999")),
    ("host-port-too-big", req(b"GET / HTTP/1.1", host=b"a:123456")),
    ("host-ipv6", req(b"GET / HTTP/1.1", host=b"[::1]:80")),
    ("host-ipv6-unbracketed", req(b"GET / HTTP/1.1", host=b"::1")),
    ("host-ipv6-unclosed", req(b"GET / HTTP/1.1", host=b"[::1")),
    ("host-empty-port", req(b"GET / HTTP/1.1", host=b"a:")),
    ("host-userinfo", req(b"GET / HTTP/1.1", host=b"a@b")),
    ("host-slash", req(b"GET / HTTP/1.1", host=b"a/b")),
    ("host-port-nonnumeric", req(b"GET / HTTP/1.1", host=b"a:b")),
    ("host-two-colons", req(b"GET / HTTP/1.1", host=b"a:1:2")),
    ("host-comma", req(b"GET / HTTP/1.1", host=b"a,b")),
    ("host-high-byte", req(b"GET / HTTP/1.1", host=b"b\xc3\xbccher.example")),
    ("obs-fold", req(b"GET / HTTP/1.1", b"X-A: 1", b" continued")),
    ("obs-fold", req(b"GET / HTTP/1.1", b"X-A: 1", b"\tcontinued")),
    ("obs-fold-first-line", b"GET / HTTP/1.1\r\n Host: a.example\r\n\r\n"),
    ("space-before-colon", req(b"GET / HTTP/1.1", b"X-A : 1")),
    ("space-before-colon", b"GET / HTTP/1.1\r\nHost : a.example\r\n\r\n"),
    ("tab-before-colon", req(b"GET / HTTP/1.1", b"X-A\t: 1")),
    ("header-name-space", req(b"GET / HTTP/1.1", b"X A: 1")),
    ("header-name-empty", req(b"GET / HTTP/1.1", b": 1")),
    ("header-no-colon", req(b"GET / HTTP/1.1", b"X-A")),
    ("header-name-non-token", req(b"GET / HTTP/1.1", b"X(A): 1")),
    ("header-name-non-token", req(b"GET / HTTP/1.1", b"X\"A: 1")),
    ("header-value-NUL", req(b"GET / HTTP/1.1", b"X-A: a\0b")),
    ("header-value-CR", req(b"GET / HTTP/1.1", b"X-A: a\rb")),
    ("header-value-DEL", req(b"GET / HTTP/1.1", b"X-A: a\x7fb")),
    ("header-value-CTL", req(b"GET / HTTP/1.1", b"X-A: a\x01b")),
    ("header-value-obs-text", req(b"GET / HTTP/1.1", b"X-A: caf\xc3\xa9")),
    ("header-value-HTAB", req(b"GET / HTTP/1.1", b"X-A: a\tb")),
    ("header-value-empty", req(b"GET / HTTP/1.1", b"X-A:")),
    ("bare-LF", b"GET / HTTP/1.1\nHost: a.example\n\n"),
    ("bare-LF@request-line", b"GET / HTTP/1.1\nHost: a.example\r\n\r\n"),
    ("bare-LF@header", b"GET / HTTP/1.1\r\nHost: a.example\n\r\n"),
    ("bare-LF@end", b"GET / HTTP/1.1\r\nHost: a.example\r\n\n"),
    ("bare-CR@request-line", b"GET / HTTP/1.1\rHost: a.example\r\n\r\n"),
    ("leading-CRLF", b"\r\n" + req(b"GET / HTTP/1.1")),
    ("leading-LF", b"\n" + req(b"GET / HTTP/1.1")),
    ("cl-te", req(b"POST / HTTP/1.1", b"Content-Length: 5", b"Transfer-Encoding: chunked")),
    ("dup-cl", req(b"POST / HTTP/1.1", b"Content-Length: 5", b"Content-Length: 5")),
    ("dup-cl", req(b"POST / HTTP/1.1", b"Content-Length: 5", b"Content-Length: 6")),
    ("cl-list", req(b"POST / HTTP/1.1", b"Content-Length: 5, 5")),
    ("cl-negative", req(b"POST / HTTP/1.1", b"Content-Length: -1")),
    ("cl-non-numeric", req(b"POST / HTTP/1.1", b"Content-Length: 5x")),
    ("cl-plus", req(b"POST / HTTP/1.1", b"Content-Length: +5")),
    ("te-not-chunked", req(b"POST / HTTP/1.1", b"Transfer-Encoding: gzip")),
    ("te-chunked-not-last", req(b"POST / HTTP/1.1", b"Transfer-Encoding: chunked, gzip")),
    ("te-gzip-chunked", req(b"POST / HTTP/1.1", b"Transfer-Encoding: gzip, chunked")),
    ("te-case", req(b"POST / HTTP/1.1", b"Transfer-Encoding: Chunked")),
    ("te-http10", req(b"POST / HTTP/1.0", b"Transfer-Encoding: chunked")),
    ("method-lowercase", req(b"get / HTTP/1.1")),
    ("method-unknown-token", req(b"FOO / HTTP/1.1")),
    ("method-unknown-token", req(b"M-SEARCH * HTTP/1.1")),
    ("method-non-token", req(b"GE(T / HTTP/1.1")),
    ("method-empty", req(b" / HTTP/1.1")),
    ("request-line-only-method", req(b"GET")),
]


def generate(seed, count):
    r = random.Random(seed)
    seen, out = set(), []

    def emit(cls, head, at=-1):
        if head not in seen:
            seen.add(head)
            out.append((cls, at, head))

    for cls, head in TARGETED:
        emit(cls, head)
    bases = [(k,) + render(*client(r, k)) for k in CLIENTS for _ in range(12)]
    for kind, head, _ in bases:
        emit("client-" + kind, head)
    combos = [(op, reg) for op in OPS for reg in REGIONS]
    tries = 0
    while len(out) < count and tries < count * 20:
        r.shuffle(combos)
        for op, region in combos:
            tries += 1
            _, head, reg = r.choice(bases)
            m = mutate(r, head, reg, op, region)
            if m and len(out) < count:
                emit("%s@%s" % (op, region), m[0], m[1])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=5000)
    a = ap.parse_args()
    for cls, at, head in generate(a.seed, a.count):
        print("%s\t%d\t%s" % (cls, at, head.hex()))


if __name__ == "__main__":
    main()
