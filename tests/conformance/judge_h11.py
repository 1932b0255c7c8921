#!/usr/bin/env python3
"""h11 judge of the differential conformance test (scripts/conformance.sh).

Reads stdin, one hex-encoded request head per line; feeds each to a fresh
h11.Connection(h11.SERVER) and prints one line per head:
  accept <METHOD> <target as hex> <version>   (h11 emitted a Request)
  reject <h11's status hint>                   (RemoteProtocolError)
  incomplete                                   (NEED_DATA)
Needs h11 from PyPI (the script runs this in target/conformance-venv).
"""
import sys

import h11


def judge(head: bytes) -> str:
    conn = h11.Connection(h11.SERVER)
    try:
        if head:  # b"" would mean end of stream to h11
            conn.receive_data(head)
        event = conn.next_event()
    except h11.RemoteProtocolError as err:
        return "reject %d" % err.error_status_hint
    if event is h11.NEED_DATA:
        return "incomplete"
    if isinstance(event, h11.Request):
        return "accept %s %s %s" % (
            event.method.decode("latin-1"),
            event.target.hex(),
            event.http_version.decode("latin-1"),
        )
    return "unexpected %r" % (event,)


def main() -> None:
    out = []
    for line in sys.stdin:
        line = line.strip()
        try:
            head = bytes.fromhex(line)
        except ValueError:
            out.append("bad-input")
            continue
        out.append(judge(head))
    sys.stdout.write("".join(v + "\n" for v in out))


if __name__ == "__main__":
    main()
