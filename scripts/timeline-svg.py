#!/usr/bin/env python3
"""Renders one request of an httplite timeline (`--trace-format chrome`) as SVG.

    scripts/timeline-svg.py TRACE.json OUT.svg [--path /_httplite/plaintext] [--title TEXT]
    scripts/timeline-svg.py --repair CUT.json OUT.json   (a crash-cut file, closed)

Perfetto (ui.perfetto.dev) is the tool to explore a timeline; this script
draws a still picture of one request for the docs, with no browser and no
service: one lane per thread (the acceptor, the workers, and a pool thread if
one ran a task in the picture's time), slices as boxes
(nested ones below their parent), instants as ticks, flow arrows (handoff ->
first poll, wake -> the poll it causes), and numbered notes like docs/server.md's
text trace: handoff, wake, first poll, the request's arrival, the poll that
reads, answers and writes, the close.

Time is drawn compressed: a gap longer than 40 µs (a thread asleep in
epoll_wait) takes the width of 40 µs and is marked with its real length, so
that microsecond steps stay readable beside second-long sleeps.

The loader is lenient the way the test suite's is (tests/server/
observability_timeline/check.rs): a file cut short by a crash lacks the closing `]`;
whole events are the lines up to the last `},` and the array is closed there.
"""

import argparse
import html
import json
import sys

CAP_US = 40.0  # a longer gap is drawn as this long, with a break mark
WIDTH = 1120  # the drawing's time axis, in px
LEFT = 90  # lane labels
LANE_H = 74
ROW_H = 19


def load(path):
    text = open(path, encoding="utf-8").read()
    if text.rstrip().endswith("]"):
        return json.loads(text)
    end = text.rfind("},\n")
    return json.loads(text[: end + 1] + "]") if end >= 0 else []


class Trace:
    def __init__(self, events):
        self.threads = {}
        self.sort = {}
        self.slices = []  # dicts: tid, name, ts, end, args, depth
        self.instants = []  # dicts: tid, name, ts, args
        self.flows = {}  # id -> list of (ph, tid, ts, slice index)
        open_ = {}
        waiting = {}
        for ev in events:
            ph, tid = ev.get("ph"), ev.get("tid")
            if ph == "M":
                if ev.get("name") == "thread_name":
                    self.threads[tid] = ev["args"]["name"]
                elif ev.get("name") == "thread_sort_index":
                    self.sort[tid] = ev["args"]["sort_index"]
                continue
            ts = float(ev["ts"])
            stack = open_.setdefault(tid, [])

            def new_slice(end):
                s = dict(tid=tid, name=ev.get("name", ""), ts=ts, end=end,
                         args=dict(ev.get("args", {})), depth=len(stack))
                self.slices.append(s)
                i = len(self.slices) - 1
                for fid, fts in waiting.pop(tid, []):
                    self.flows.setdefault(fid, []).append(("f", tid, fts, i))
                return i

            if ph == "B":
                stack.append(new_slice(None))
            elif ph == "E":
                if stack:
                    s = self.slices[stack.pop()]
                    s["end"] = ts
                    s["args"].update(ev.get("args", {}))
            elif ph == "X":
                new_slice(ts + float(ev.get("dur", 0)))
            elif ph == "i":
                self.instants.append(dict(tid=tid, name=ev.get("name", ""), ts=ts,
                                          args=ev.get("args", {})))
            elif ph in ("s", "t", "f"):
                if ph == "f" and ev.get("bp") != "e":
                    waiting.setdefault(tid, []).append((ev["id"], ts))
                elif stack:
                    self.flows.setdefault(ev["id"], []).append((ph, tid, ts, stack[-1]))
        for s in self.slices:  # unended (a cut file): end at the last event
            if s["end"] is None:
                s["end"] = s["ts"]

    def tid(self, name):
        return next((t for t, n in self.threads.items() if n == name), None)

    def flow_from(self, slice_index):
        for fid, evs in self.flows.items():
            if any(e[0] == "s" and e[3] == slice_index for e in evs):
                return fid
        return None

    def flows_of(self, event):
        """Every event of the flow that `event` (a flow event) belongs to."""
        return next((evs for evs in self.flows.values() if event in evs), [])

    def flow_end(self, fid):
        return next((e for e in self.flows.get(fid, []) if e[0] == "f"), None)


def us(d):
    if d >= 1e6:
        return f"{d / 1e6:.1f} s"
    if d >= 1e3:
        return f"{d / 1e3:.1f} ms"
    return f"{d:.1f} µs"


def find_story(tr, path):
    """The request's slices and the steps worth a note, in order."""
    req_i = next((i for i, s in enumerate(tr.slices)
                  if s["name"] == f"GET {path}"), None)
    if req_i is None:
        sys.exit(f"no request slice 'GET {path}' in the trace")
    req = tr.slices[req_i]
    fd, wtid = req["args"].get("fd"), req["tid"]
    hand_i = max((i for i, s in enumerate(tr.slices)
                  if s["name"] == "handoff" and fd in s["args"].get("fds", [])
                  and s["ts"] <= req["ts"]), key=lambda i: tr.slices[i]["ts"])
    hand = tr.slices[hand_i]
    fid = tr.flow_from(hand_i)
    first = tr.flow_end(fid) if fid is not None else None
    first_s = tr.slices[first[3]] if first else None
    conn = first_s["name"] if first_s else None  # "poll task=N" / "resume co=N"
    on_w = [s for s in tr.slices if s["tid"] == wtid]
    wake_ep = next((s for s in on_w if s["name"] == "epoll_wait"
                    and s["end"] >= hand["ts"]), None)
    received = next((i for i in tr.instants if i["tid"] == wtid
                     and i["name"] == "handoff received" and i["ts"] >= hand["ts"]), None)
    arrive = next((s for s in on_w if s["name"] == "epoll_wait"
                   and f"{fd}:IN" in str(s["args"].get("fds", ""))
                   and first_s and s["ts"] >= first_s["end"]
                   and s["end"] <= req["ts"]), None)
    serve = next((s for s in on_w if s["name"] == conn and s["ts"] <= req["ts"] <= s["end"]),
                 None)
    close_ep = next((s for s in on_w if s["name"] == "epoll_wait"
                     and "RDHUP" in str(s["args"].get("fds", ""))
                     and s["ts"] >= req["end"]), None)
    last = None
    if close_ep:
        last = next((s for s in on_w if s["name"] == conn and s["ts"] >= close_ep["end"]), None)
    # Work the request handed to the pool (a listing): the pool slice that
    # an arrow from one of the connection's polls on this worker enters,
    # before the poll that answered.
    pool = submit = None
    for i, s in enumerate(tr.slices):
        name = tr.threads.get(s["tid"], "")
        if not (name.startswith("pool") and name[4:].isdigit()):
            continue
        if not (arrive and serve and arrive["end"] <= s["ts"] <= serve["ts"]):
            continue
        into = [e for evs in tr.flows.values() for e in evs if e[0] == "f" and e[3] == i]
        for e in into:
            start = next((x for x in tr.flows_of(e) if x[0] == "s"), None)
            if start and tr.slices[start[3]]["tid"] == wtid \
                    and tr.slices[start[3]]["name"] == conn:
                pool, submit = s, tr.slices[start[3]]
                break
        if pool:
            break
    return dict(req=req, hand=hand, first=first_s, wake_ep=wake_ep, received=received,
                arrive=arrive, serve=serve, close_ep=close_ep, last=last, fd=fd,
                worker=tr.threads.get(wtid, "?"), conn=conn, pool=pool, submit=submit)


class Axis:
    """Compressed time: gaps longer than CAP_US are drawn CAP_US long."""

    def __init__(self, stamps, t0, t1):
        pts = sorted({t for t in stamps if t0 <= t <= t1} | {t0, t1})
        drawn = [0.0]
        for a, b in zip(pts, pts[1:]):
            drawn.append(drawn[-1] + min(b - a, CAP_US))
        self.pts, self.drawn = pts, drawn
        self.scale = WIDTH / max(drawn[-1], 1e-9)
        self.breaks = [(a, b) for a, b in zip(pts, pts[1:]) if b - a > CAP_US]

    def x(self, t):
        import bisect
        t = min(max(t, self.pts[0]), self.pts[-1])
        i = bisect.bisect_right(self.pts, t) - 1
        i = min(i, len(self.pts) - 2) if len(self.pts) > 1 else 0
        a = self.pts[i]
        b = self.pts[i + 1] if i + 1 < len(self.pts) else a
        d = min(t - a, CAP_US) if b - a > CAP_US else t - a
        return LEFT + (self.drawn[i] + d) * self.scale


COLORS = {
    "epoll_wait": ("#e8e8e8", "#888"),
    "io_uring_enter": ("#e8e8e8", "#888"),
    "handoff": ("#f6c58f", "#c0772a"),
    "poll": ("#9cc3ea", "#3a6ea5"),
    "resume": ("#b7a6e3", "#5b45a0"),
    "GET": ("#9ed79e", "#2f7d32"),
}


def color(name):
    for k, c in COLORS.items():
        if name.startswith(k):
            return c
    return ("#ddd", "#777")


def numbered(name, prefix):
    """Whether a thread is named `prefix` and a number (w0, pool3)."""
    return name.startswith(prefix) and name[len(prefix):].isdigit()


def render(tr, story, title):
    hand, req = story["hand"], story["req"]
    t0 = hand["ts"] - 15
    end_s = story["last"] or story["serve"] or req
    t1 = end_s["end"] + 15
    # The acceptor and the workers; a pool thread only if it ran something
    # in the picture's time (a listing, a job).
    busy = {s["tid"] for s in tr.slices if s["end"] >= t0 and s["ts"] <= t1}
    lanes = sorted((t for t, n in tr.threads.items()
                    if n == "acceptor" or numbered(n, "w")
                    or (numbered(n, "pool") and t in busy)),
                   key=lambda t: tr.sort.get(t, 999))
    stamps = []
    for s in tr.slices:
        if s["tid"] in lanes and s["end"] >= t0 and s["ts"] <= t1:
            stamps += [s["ts"], s["end"]]
    for i in tr.instants:
        if i["tid"] in lanes:
            stamps.append(i["ts"])
    ax = Axis(stamps, t0, t1)
    top = 58
    height = top + LANE_H * len(lanes) + 30
    notes = []
    out = []
    w = LEFT + WIDTH + 20
    out.append(f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{{H}}" '
               f'font-family="DejaVu Sans, Arial, sans-serif" font-size="11">')
    out.append('<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
               'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
               '<path d="M0,0 L10,5 L0,10 z" fill="#c62828"/></marker></defs>')
    out.append(f'<rect width="{w}" height="{{H}}" fill="white"/>')
    out.append(f'<text x="{LEFT}" y="20" font-size="14" font-weight="bold">'
               f'{html.escape(title)}</text>')
    out.append(f'<text x="{LEFT}" y="38" fill="#555">time runs right; a gap over '
               f'{CAP_US:.0f} µs is drawn {CAP_US:.0f} µs wide and marked ≈ with its '
               f'real length; arrows: handoff → first poll, wake → the poll it causes</text>')
    lane_y = {}
    for k, tid in enumerate(lanes):
        y = top + k * LANE_H
        lane_y[tid] = y
        fill = "#fafafa" if k % 2 == 0 else "#f2f5f8"
        out.append(f'<rect x="{LEFT}" y="{y}" width="{WIDTH}" height="{LANE_H - 4}" '
                   f'fill="{fill}"/>')
        out.append(f'<text x="{LEFT - 8}" y="{y + 22}" text-anchor="end" '
                   f'font-weight="bold">{html.escape(tr.threads[tid])}</text>')
    for a, b in ax.breaks:
        x = ax.x(a) + CAP_US * ax.scale / 2
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" '
                   f'y2="{top + LANE_H * len(lanes) - 4}" stroke="#bbb" '
                   f'stroke-dasharray="2,3"/>')
        out.append(f'<text x="{x:.1f}" y="{top + LANE_H * len(lanes) + 10}" '
                   f'text-anchor="middle" fill="#999" font-size="9">≈{us(b - a)}</text>')

    def box(s):
        y = lane_y[s["tid"]] + 6 + s["depth"] * ROW_H
        x0, x1 = ax.x(max(s["ts"], t0)), ax.x(min(s["end"], t1))
        fill, stroke = color(s["name"])
        out.append(f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1.5):.1f}" '
                   f'height="{ROW_H - 3}" fill="{fill}" stroke="{stroke}" rx="2"/>')
        label = s["name"]
        inside = s["ts"] >= t0 and s["end"] <= t1
        if s["name"] == "epoll_wait" and inside and s["args"].get("fds"):
            label = f'epoll_wait [{s["args"]["fds"]}]'
        if s["name"].startswith("GET"):
            label = f'{s["name"]} → {s["args"].get("status")}'
        room = (x1 - x0) / 6.2
        if room >= 4:
            text = label if len(label) <= room else label[: int(room) - 1] + "…"
            out.append(f'<text x="{x0 + 3:.1f}" y="{y + 12}" font-size="10">'
                       f'{html.escape(text)}</text>')
        return x0, x1, y

    drawn = {}
    for i, s in enumerate(tr.slices):
        if s["tid"] in lane_y and s["end"] >= t0 and s["ts"] <= t1:
            drawn[i] = box(s)
    for ins in tr.instants:
        if ins["tid"] in lane_y and t0 <= ins["ts"] <= t1:
            x = ax.x(ins["ts"])
            y = lane_y[ins["tid"]] + LANE_H - 14
            out.append(f'<path d="M{x:.1f},{y} l-4,7 h8 z" fill="#c62828">'
                       f'<title>{html.escape(ins["name"])}</title></path>')
            if ins["name"] != "wake":
                label = ins["name"].replace("handoff received", "received")
                out.append(f'<text x="{x + 5:.1f}" y="{y + 7}" font-size="8" '
                           f'fill="#555">{html.escape(label)}</text>')
    for fid, evs in tr.flows.items():
        pts = sorted(evs, key=lambda e: ({"s": 0, "t": 1, "f": 2}[e[0]], e[2]))
        coords = []
        for ph, tid, ts, si in pts:
            if si in drawn and tid in lane_y and t0 <= ts <= t1:
                _, _, y = drawn[si]
                coords.append((ax.x(ts), y + ROW_H - 4))
        for (xa, ya), (xb, yb) in zip(coords, coords[1:]):
            # Within one row the arrow dips below it, to stay visible.
            dip = 16 if abs(ya - yb) < 1 else 0
            out.append(f'<path d="M{xa:.1f},{ya:.1f} C{xa + 12:.1f},{ya + dip:.1f} '
                       f'{xb - 12:.1f},{yb + dip:.1f} {xb:.1f},{yb:.1f}" fill="none" '
                       f'stroke="#c62828" stroke-width="1.3" marker-end="url(#arrow)"/>')

    placed = []

    def note(n, t, tid, row, text):
        if tid not in lane_y:
            return
        x = ax.x(t)
        y = lane_y[tid] + 6 + row * ROW_H + 8
        while any(abs(x - px) < 15 and py == y for px, py in placed):
            x += 15  # beside a note at the same place, not over it
        placed.append((x, y))
        out.append(f'<circle cx="{x:.1f}" cy="{y - 14:.1f}" r="7" fill="#333"/>')
        out.append(f'<text x="{x:.1f}" y="{y - 10.5:.1f}" fill="white" font-size="9" '
                   f'text-anchor="middle">{n}</text>')
        notes.append(f"{n}. {text}")

    st = story
    fd, worker = st["fd"], st["worker"]
    wtid = req["tid"]
    n = 1
    note(n, hand["ts"], hand["tid"], 0,
         f"acceptor: accept4 gave fd {fd}; it is written into {worker}'s pipe "
         f"(handoff, {us(hand['end'] - hand['ts'])}); the arrow follows the connection")
    n += 1
    if st["wake_ep"]:
        e = st["wake_ep"]
        note(n, e["end"], wtid, 0,
             f"{worker} wakes from epoll_wait (slept {us(e['args'].get('slept_us', 0))}): "
             f"its pipe is readable [{e['args'].get('fds')}]; the wake's arrow goes to "
             f"the handoff loop")
        n += 1
    if st["received"]:
        note(n, st["received"]["ts"], wtid, 1,
             f"the handoff loop reads fd {fd} from the pipe and spawns the connection "
             f"({st['conn']})")
        n += 1
    if st["first"]:
        f = st["first"]
        note(n, f["ts"], wtid, 0,
             f"first {f['name']}: nothing to read yet, the connection parks "
             f"({f['args'].get('result', '')}, {us(f['end'] - f['ts'])})")
        n += 1
    if st["arrive"]:
        a = st["arrive"]
        note(n, a["end"], wtid, 0,
             f"the request arrives: epoll_wait returns [{a['args'].get('fds')}] after "
             f"{us(a['args'].get('slept_us', 0))}; the reactor wakes the connection")
        n += 1
    if st["pool"]:
        p, sub = st["pool"], st["submit"]
        note(n, sub["ts"], wtid, 0,
             f"that {sub['name'].split()[0]} reads and parses the request and hands the "
             f"{p['name']} to the blocking pool (the arrow to "
             f"{tr.threads.get(p['tid'])}), then parks ({sub['args'].get('result', '')})")
        n += 1
        note(n, p["ts"], p["tid"], 0,
             f"{tr.threads.get(p['tid'])} runs the {p['name']} ({us(p['end'] - p['ts'])}); "
             f"its result wakes the connection from the pool thread: the arrow back")
        n += 1
    if st["serve"]:
        s = st["serve"]
        done = ("the pool's wake caused answers" if st["pool"]
                else "that wake caused reads, parses and answers")
        note(n, req["ts"], wtid, 1,
             f"the {s['name'].split()[0]} {done} "
             f"{req['name']} → {req['args'].get('status')} "
             f"({req['args'].get('body_bytes')} B body) and writes it: request slice "
             f"{us(req['end'] - req['ts'])} inside a {us(s['end'] - s['ts'])} "
             f"{s['name']}")
        n += 1
    if st["close_ep"]:
        c = st["close_ep"]
        note(n, c["end"], wtid, 0,
             f"the client closes: [{c['args'].get('fds')}] wakes the connection again")
        n += 1
    if st["last"]:
        note(n, st["last"]["ts"], wtid, 0,
             f"last {st['last']['name']}: end of file, deregister, close: "
             f"{st['last']['args'].get('result')}")
        n += 1
    y = top + LANE_H * len(lanes) + 32
    for line in notes:
        out.append(f'<text x="{LEFT}" y="{y}">{html.escape(line)}</text>')
        y += 16
    height = y + 6
    out.append("</svg>")
    return "\n".join(out).replace("{H}", str(height)) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace")
    p.add_argument("out")
    p.add_argument("--path", default="/_httplite/plaintext")
    p.add_argument("--title", default="one request through an httplite worker")
    p.add_argument("--repair", action="store_true",
                   help="write the events read (a cut file, closed) to OUT as JSON instead")
    a = p.parse_args()
    events = load(a.trace)
    if a.repair:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(events, f)
        print(f"{a.out}: {len(events)} events")
        return
    tr = Trace(events)
    story = find_story(tr, a.path)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(render(tr, story, a.title))
    print(f"{a.out}: {len(tr.slices)} slices read; request fd {story['fd']} on "
          f"{story['worker']}")


if __name__ == "__main__":
    main()
