#!/usr/bin/env python3
"""A ratio between two servers with its 95 % confidence interval, from
slices interleaved in time.

Input (stdin): CSV rows `slice,server,value` (value: e.g. server CPU µs per
request in that slice), slices run A, B, C, ... then again, so that slice k
of every server ran within seconds of the others'. The ratio of A to B is
formed per slice (A_k / B_k: a slow spell of the host lands on both sides
of it), and the interval is a bootstrap over those per-slice ratios (10,000
resamples of the median, percentile method, a fixed seed so that a rerun
on the same data prints the same interval).

Usage: ratio_ci.py A B [B2 ...] < slices.csv
Prints one line per B: `A/B median [low, high] n=K`.

As a module (scripts/lib/bench_report.py): `nearest_ratios` pairs each
slice of A with the slice of B nearest in time within the same group (a
round), for runs whose slices do not come in numbered passes of one slice
each, and `interval` gives the median and the bootstrap interval.
"""

import bisect
import csv
import random
import statistics
import sys


def bootstrap(ratios, rounds=10_000, seed=1):
    rng = random.Random(seed)
    n = len(ratios)
    medians = sorted(
        statistics.median(rng.choice(ratios) for _ in range(n)) for _ in range(rounds)
    )
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


def interval(ratios):
    """(median, low, high) of per-slice ratios, or None with fewer than 2."""
    if len(ratios) < 2:
        return None
    low, high = bootstrap(ratios)
    return statistics.median(ratios), low, high


def nearest_ratios(a, b):
    """a, b: lists of (group, time, value). For every slice of A, A / the
    value of B's slice of the same group whose time is nearest (the earlier
    one on a tie). A slice of B may serve two neighbouring slices of A."""
    by_group = {}
    for g, t, v in b:
        if v > 0:
            by_group.setdefault(g, []).append((t, v))
    for g in by_group:
        by_group[g].sort()
    ratios = []
    for g, t, v in a:
        bs = by_group.get(g)
        if not bs:
            continue
        i = bisect.bisect_left(bs, (t,))
        _, vb = min(bs[max(0, i - 1):i + 1], key=lambda x: (abs(x[0] - t), x[0]))
        ratios.append(v / vb)
    return ratios


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    a, others = sys.argv[1], sys.argv[2:]
    by = {}
    for row in csv.reader(sys.stdin):
        if len(row) != 3 or row[0] == "slice":
            continue
        try:
            by.setdefault(row[1], {})[int(row[0])] = float(row[2])
        except ValueError:
            continue
    for b in others:
        common = sorted(set(by.get(a, {})) & set(by.get(b, {})))
        ratios = [by[a][k] / by[b][k] for k in common if by[b][k] > 0]
        got = interval(ratios)
        if got is None:
            print(f"{a}/{b} n/a (fewer than 2 slices of both)")
            continue
        median, low, high = got
        print(f"{a}/{b} {median:.3f} [{low:.3f}, {high:.3f}] n={len(ratios)}")


if __name__ == "__main__":
    main()
