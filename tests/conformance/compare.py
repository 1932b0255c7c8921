#!/usr/bin/env python3
"""Compares the three judges' verdicts on the generated heads (conformance.sh).

Inputs: the generator's TSV (class, offset, hex) and one verdict file per
judge, line-aligned with it (see judge.rs, judge_h11.py, judge_llhttp.js).
Verdicts are compared by kind (accept / reject / incomplete) and, for accept,
by method, target and version. Reject reasons are not compared. Our decoder
knows only 1.0 and 1.1 and serves a well-formed HTTP/1.x (x > 1) as 1.1, so
our `1.1` matches a reference's `1.x` for any x >= 1.

Prints a summary; writes every non-unanimous head to --details. Exits 1 if
the two references agree on a head and we do not, unless the head is covered
by ALLOWLIST; exits 2 if the inputs do not line up.
"""
import argparse
import collections
import re
import sys
from typing import Callable, NamedTuple

import rfc


class Allow(NamedTuple):
    """A class of heads where we knowingly differ from both references."""
    name: str
    applies: Callable[[str, bytes], bool]  # (class, head) -> covered?
    reason: str
    rfc: str


# Each entry says why the RFC makes us differ from both references, which
# leave these rules unchecked. An entry covers a head only when we reject
# it and rfc.py, a second reading of the RFC, finds the same fault; so a
# head we reject for any other reason still fails the run.
ALLOWLIST: list[Allow] = [
    Allow("host-value", lambda cls, head: rfc.host_invalid(head),
          "a Host value that is not uri-host [\":\" port] is 400; neither reference checks it",
          "RFC 9112 §3.2, RFC 3986 §3.2.2-3.2.3"),
    Allow("target-form", lambda cls, head: rfc.target_form_invalid(head),
          "a target outside the four forms, a form its method may not use, a fragment, "
          "or an absolute-form that is no http(s) URI with a host and no userinfo, is 400",
          "RFC 9112 §3.2, §3.2.1-3.2.4, RFC 9110 §4.2.1, §4.2.4"),
    Allow("version-major", lambda cls, head: rfc.version_major_not_1(head),
          "a well-formed HTTP/0.9 or HTTP/2.0 request line is answered 505",
          "RFC 9110 §6.2, §15.6.6"),
    Allow("te-http10", lambda cls, head: rfc.te_in_http10(head),
          "Transfer-Encoding in an HTTP/1.0 request is faulty framing: 400",
          "RFC 9112 §6.1"),
]


def parse(v):
    """A verdict line as a tuple: ('accept', method, target hex, version),
    ('reject', reason) or ('incomplete',)."""
    if v.startswith("accept "):
        parts = v.rstrip("\n").split(" ")  # an empty target is an empty field
        if len(parts) == 4:
            return tuple(parts)
    parts = v.split()
    if parts and parts[0] == "reject":
        return ("reject", " ".join(parts[1:]))
    return tuple(parts) or ("empty",)


def same(a, b, ours=False):
    """Do verdicts a and b agree? With ours=True, a is our decoder's."""
    if a[0] != b[0]:
        return False
    if a[0] != "accept":
        return True
    if a[1:3] != b[1:3]:
        return False
    return a[3] == b[3] or (ours and a[3] == "1.1" and re.fullmatch(r"1\.[1-9]", b[3]) is not None)


def esc(b: bytes) -> str:
    out = []
    for c in b:
        if c == 0x5C:
            out.append("\\\\")
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append({9: "\\t", 10: "\\n", 13: "\\r"}.get(c, "\\x%02x" % c))
    return "".join(out)


def show_head(head: bytes, at: int) -> str:
    """The head escaped; long heads cut to the request line plus the bytes
    around the mutation."""
    if len(head) <= 110:
        return '"%s"' % esc(head)
    eol = head.find(b"\n")
    first = head[: min(eol + 1 if eol >= 0 else 80, 80)]
    if at < 0 or at < len(first):
        return '"%s" ... (%d bytes)' % (esc(head[:100]), len(head))
    return '"%s" ... "%s" ... (%d bytes)' % (esc(first), esc(head[max(at - 25, len(first)):at + 25]), len(head))


def show_verdict(v) -> str:
    if v[0] == "accept":
        return "accept %s %s %s" % (v[1], esc(bytes.fromhex(v[2]))[:60] or "<empty>", v[3])
    return " ".join(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("heads", "ours", "h11", "llhttp", "details"):
        ap.add_argument("--" + name, required=True)
    ap.add_argument("--examples", type=int, default=3)
    a = ap.parse_args()

    heads = [line.rstrip("\n").split("\t") for line in open(a.heads)]
    verdicts = {j: [parse(l) for l in open(getattr(a, j))] for j in ("ours", "h11", "llhttp")}
    for j, vs in verdicts.items():
        if len(vs) != len(heads):
            sys.exit("compare: %s gave %d verdicts for %d heads" % (j, len(vs), len(heads)))

    unanimous = 0
    we_differ = collections.defaultdict(list)  # class -> [(head, at, ours, ref)]
    allowed = collections.Counter()
    refs_differ = collections.defaultdict(list)  # class -> [(head, at, ours, h11, ll)]
    details = open(a.details, "w")
    for i, (cls, at, hexhead) in enumerate(heads):
        head, at = bytes.fromhex(hexhead), int(at)
        o, h, l = (verdicts[j][i] for j in ("ours", "h11", "llhttp"))
        if same(h, l):
            if same(o, h, ours=True):
                unanimous += 1
                continue
            rule = None
            if o[0] == "reject":
                rule = next((r for r in ALLOWLIST if r.applies(cls, head)), None)
            if rule:
                allowed[rule.name] += 1
            else:
                we_differ[cls].append((head, at, o, h, l))
            kind = "allowed:" + rule.name if rule else "WE-DIFFER"
        else:
            refs_differ[cls].append((head, at, o, h, l))
            kind = "REFS-DIFFER"
        details.write("%s\t%s\t%s\tours=%s | h11=%s | llhttp=%s\n" % (
            kind, cls, show_head(head, at), show_verdict(o), show_verdict(h), show_verdict(l)))
    details.close()

    n_differ = sum(map(len, we_differ.values()))
    n_refs = sum(map(len, refs_differ.values()))
    print("== conformance summary ==")
    print("heads judged:                        %d" % len(heads))
    print("all three agree:                     %d" % unanimous)
    print("references agree, http1 differs:     %d in %d classes" % (n_differ, len(we_differ)))
    print("  ... of which allowlisted:          %d %s" % (sum(allowed.values()), dict(allowed) or ""))
    print("references disagree with each other: %d in %d classes" % (n_refs, len(refs_differ)))

    def kinds(o, h, l):
        return "h11=%s llhttp=%s ours=%s" % (h[0], l[0], o[0])

    if we_differ:
        print("\n== references agree, http1 differs (bugs unless allowlisted) ==")
    for cls, rows in sorted(we_differ.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print("%s (%d): %s" % (cls, len(rows), ", ".join(
            "%s x%d" % (k, n) for k, n in collections.Counter(kinds(*r[2:]) for r in rows).most_common())))
        for head, at, o, h, l in rows[: a.examples]:
            print("    %s" % show_head(head, at))
            print("      ours: %s | h11: %s | llhttp: %s" % (show_verdict(o), show_verdict(h), show_verdict(l)))
    if refs_differ:
        print("\n== references disagree (our verdict should follow the RFC) ==")
    for cls, rows in sorted(refs_differ.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print("%s (%d): %s" % (cls, len(rows), ", ".join(
            "%s x%d" % (k, n) for k, n in collections.Counter(kinds(*r[2:]) for r in rows).most_common())))
        for head, at, o, h, l in rows[: min(a.examples, 2)]:
            print("    %s" % show_head(head, at))
            print("      ours: %s | h11: %s | llhttp: %s" % (show_verdict(o), show_verdict(h), show_verdict(l)))
    print("\ndetails of every non-unanimous head: %s" % a.details)
    sys.exit(1 if we_differ else 0)


if __name__ == "__main__":
    main()
