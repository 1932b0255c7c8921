"""The RFC rules the allowlist in compare.py cites, written again here in
Python from RFC 9112 and RFC 3986 (not from crates/http1), so that an
allowlisted difference is one this second reading also calls invalid.

Each predicate takes a whole request head (bytes) and says whether it breaks
one rule that both reference parsers leave unchecked.
"""
import re

# RFC 3986 §2.2-2.3, §3.2.2-3.2.3.
UNRESERVED = r"A-Za-z0-9\-._~"
SUB_DELIMS = r"!$&'()*+,;="
PCT = r"%[0-9A-Fa-f]{2}"
REG_NAME = r"(?:[%s%s]|%s)*" % (UNRESERVED, SUB_DELIMS, PCT)
IPVFUTURE = r"[vV][0-9A-Fa-f]+\.[%s%s:]+" % (UNRESERVED, SUB_DELIMS)
# IPv6 is checked by the ipaddress module, not a regex.
HOST_PORT = re.compile(r"(?:\[(?P<lit>[^\]]*)\]|(?P<name>%s))(?::(?P<port>[0-9]*))?\Z" % REG_NAME)


def _ipv6(s: str) -> bool:
    import ipaddress
    try:
        ipaddress.IPv6Address(s)
        return "%" not in s  # no zone identifiers in HTTP URIs
    except ValueError:
        return False


def host_port_valid(value: bytes, need_host=False, need_port=False) -> bool:
    """`uri-host [ ":" port ]` (RFC 3986), a port of at most 5 digits and
    at most 65535; optionally a non-empty host and a port."""
    try:
        s = value.decode("ascii")
    except UnicodeDecodeError:
        return False
    m = HOST_PORT.match(s)
    if not m:
        return False
    lit = m.group("lit")
    if lit is not None and not (_ipv6(lit) or re.fullmatch(IPVFUTURE, lit)):
        return False
    port = m.group("port")
    if port is not None and (len(port) > 5 or (port and int(port) > 65535)):
        return False
    if need_host and not (lit or m.group("name")):
        return False
    if need_port and not port:
        return False
    return True


def request_line(head: bytes):
    """(method, target, version) when the line is three parts split by
    single spaces, else None."""
    line = re.split(rb"\r?\n", head, maxsplit=1)[0]
    parts = line.split(b" ")
    return tuple(parts) if len(parts) == 3 else None


def fields(head: bytes):
    """(name, value) of each header line, values trimmed."""
    lines = re.split(rb"\r?\n", head)[1:]
    out = []
    for line in lines:
        if not line:
            break
        name, _, value = line.partition(b":")
        out.append((name, value.strip(b" \t")))
    return out


def host_invalid(head: bytes) -> bool:
    """RFC 9112 §3.2: one Host line whose value is not `uri-host [":" port]`."""
    hosts = [v for n, v in fields(head) if n.lower() == b"host"]
    return len(hosts) == 1 and not host_port_valid(hosts[0])


ORIGIN_CHARS = re.compile(rb"[\x21-\x7e]*\Z")


def target_form_invalid(head: bytes) -> bool:
    """RFC 9112 §3.2: the target is none of the four forms, or a form the
    method may not use, or (RFC 9110 §4.2) an absolute-form that is not an
    `http`/`https` URI with a host and no userinfo, or it holds `#`."""
    line = request_line(head)
    if not line:
        return False
    method, target, _ = line
    if b"#" in target or not ORIGIN_CHARS.match(target) or not target:
        return True
    if method == b"CONNECT":
        return not host_port_valid(target, need_host=True, need_port=True)
    if target == b"*":
        return method != b"OPTIONS"
    if target.startswith(b"/"):
        return False
    m = re.fullmatch(rb"(?i:https?)://([^/?]*)([/?].*)?", target)
    return not (m and b"@" not in m.group(1) and host_port_valid(m.group(1), need_host=True))


def version_major_not_1(head: bytes) -> bool:
    """RFC 9110 §6.2, §15.6.6: a well-formed version of another major (505)."""
    line = request_line(head)
    return bool(line) and re.fullmatch(rb"HTTP/[02-9]\.[0-9]", line[2]) is not None


def te_in_http10(head: bytes) -> bool:
    """RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 request is faulty
    framing."""
    line = request_line(head)
    return bool(line) and line[2] == b"HTTP/1.0" and any(
        n.lower() == b"transfer-encoding" for n, _ in fields(head))
