#!/usr/bin/env python3
"""Draws docs/bench/select-poll-epoll.svg from the table that
`cargo run --release -p reactor --example select_poll_epoll` prints.

Usage: scripts/lib/select_poll_epoll_chart.py OUTPUT.txt [CHART.svg]

OUTPUT.txt is the example's output saved as is (docs/bench/select-poll-epoll.txt).
The chart is log-log: idle connections across, nanoseconds per wait up; a
cell that is an error (select past FD_SETSIZE) is left out of its line and
named in the legend. Plain SVG written by hand, like scripts/lib/bench_report.py.
"""
import html
import math
import re
import sys

src = sys.argv[1]
dst = sys.argv[2] if len(sys.argv) > 2 else "docs/bench/select-poll-epoll.svg"

rows = []
for line in open(src):
    m = re.match(r"\|\s*(\d+)\s*\|(.*)\|(.*)\|(.*)\|\s*$", line)
    if not m:
        continue
    cells = [m.group(i).strip() for i in (2, 3, 4)]
    vals = [float(c.split()[0]) if c.endswith(" ns") else None for c in cells]
    rows.append((int(m.group(1)), vals))
if not rows:
    sys.exit(f"{src}: no table rows found")

# name, colour, where a point's label goes (dx, dy, anchor): select's above
# and left, poll's below and right, so that the two near-equal lines stay legible.
series = [("select", "#c53030", -6, -7, "end"), ("poll", "#d9822b", 6, 15, "start"),
          ("epoll_wait", "#2b6cb0", 6, 16, "start")]
w, h = 800, 420
left, right, top, bottom = 80, 210, 40, 60
xs = [n for n, _ in rows]
ys = [v for _, vals in rows for v in vals if v is not None]
x0, x1 = math.log10(min(xs)), math.log10(max(xs))
y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
x1 = x1 if x1 > x0 else x0 + 1


def px(n):
    return left + (math.log10(n) - x0) / (x1 - x0) * (w - left - right)


def py(v):
    return h - bottom - (math.log10(v) - y0) / (y1 - y0) * (h - top - bottom)


def ns(v):
    if v >= 1e6:
        return f"{v / 1e6:.1f} ms"
    return f"{v / 1000:.1f} µs" if v >= 1000 else f"{v:.0f} ns"


s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
     f'font-family="sans-serif" font-size="12">',
     f'<rect width="{w}" height="{h}" fill="white"/>',
     '<text x="10" y="22" font-size="15" font-weight="bold">'
     'One readiness wait, 1 active + N idle TCP connections (log-log)</text>']
for e in range(y0, y1 + 1):  # horizontal grid, one line per power of ten
    y = py(10 ** e)
    s.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - right}" y2="{y:.1f}" stroke="#ddd"/>')
    s.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{ns(10 ** e)}</text>')
for n in xs:
    x = px(n)
    s.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{h - bottom}" stroke="#eee"/>')
    s.append(f'<text x="{x:.1f}" y="{h - bottom + 16}" text-anchor="middle">{n:,}</text>')
s.append(f'<text x="{(left + w - right) / 2}" y="{h - 18}" text-anchor="middle">'
         'idle connections watched (N)</text>')
for i, (name, colour, dx, dy, anchor) in enumerate(series):
    pts = [(px(n), py(vals[i]), vals[i]) for n, vals in rows if vals[i] is not None]
    if len(pts) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in pts)
        s.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
    for x, y, v in pts:
        s.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>')
        s.append(f'<text x="{x + dx:.1f}" y="{y + dy:.1f}" text-anchor="{anchor}" '
                 f'fill="{colour}">{ns(v)}</text>')
    missing = [n for n, vals in rows if vals[i] is None]
    ly = top + 20 + i * 40
    s.append(f'<rect x="{w - right + 75}" y="{ly - 10}" width="14" height="4" fill="{colour}"/>')
    s.append(f'<text x="{w - right + 95}" y="{ly - 4}">{html.escape(name)}</text>')
    if missing:
        s.append(f'<text x="{w - right + 95}" y="{ly + 12}" fill="#888" font-size="11">'
                 f'error at N = {", ".join(f"{n:,}" for n in missing)}</text>')
s.append("</svg>")
with open(dst, "w") as f:
    f.write("\n".join(s) + "\n")
print(f"wrote {dst}")
