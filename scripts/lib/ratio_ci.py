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
"""

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
        if len(ratios) < 2:
            print(f"{a}/{b} n/a (fewer than 2 slices of both)")
            continue
        low, high = bootstrap(ratios)
        print(f"{a}/{b} {statistics.median(ratios):.3f} [{low:.3f}, {high:.3f}] n={len(ratios)}")


if __name__ == "__main__":
    main()
