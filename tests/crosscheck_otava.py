#!/usr/bin/env python3
"""Cross-check `lab changes` against Apache Otava's own change points.

Usage: crosscheck_otava.py PATH/TO/lab [SERIES] [SEED]

Generates SERIES (default 600) deterministic random series (seeded: level shifts, noise,
outliers, whole-number and rounded values with ties, constant runs; 3 to 160 points), with
windows and thresholds varied, runs `lab changes FILE --json` on each and
`otava.analysis.compute_change_points` (apache-otava 0.8.0 from PyPI) on the same values, and
compares the change-point indices exactly. Prints how many series were compared and every
difference; exits 1 on any mismatch, 2 when otava is not importable. A difference where Otava
met a p-value equal to a threshold to 1e-12 (a tie in exact arithmetic, decided by the last
bits of the t distribution's tail) is printed and counted apart, not as a mismatch.

The series goes to Otava as a Python list of floats, never a numpy array: with an array,
Otava 0.8.0 analyses the whole series in every window (detector.py:37-38 only slices lists).
"""

import json
import os
import random
import subprocess
import sys
import tempfile
import time

try:
    import otava.analysis
    from otava.analysis import compute_change_points
except ImportError as e:
    print(f"otava is not importable ({e}); install it with "
          "`pip install --no-deps apache-otava==0.8.0 numpy==2.2.0 'scipy>=1.16,<1.17'`")
    sys.exit(2)

WINDOWS = [2, 3, 4, 5, 6, 8, 10, 16, 20, 30, 50]
MAX_P = [0.0001, 0.001, 0.001, 0.01, 0.05, 0.2, 0.3, 0.6]
MIN_MAG = [0.0, 0.0, 0.02, 0.05, 0.1]
KINDS = ["noisy", "integer", "rounded", "constant", "outliers", "long"]


def series(rng: random.Random, kind: str) -> list:
    n = rng.randint(80, 160) if kind == "long" else rng.randint(3, 60)
    level = rng.choice([0.0, 1.0, 10.0, 100.0, -5.0])
    noise = rng.choice([0.1, 0.5, 1.0, 3.0])
    xs = []
    for _ in range(n):
        if rng.random() < 0.08:
            level += rng.choice([-3, -1, 1, 2, 5, 10]) * noise
        x = level + rng.gauss(0, noise)
        if kind == "integer":
            x = float(round(x))
        elif kind == "rounded":
            x = round(x, 1)
        elif kind == "constant":
            x = level
        elif kind == "outliers" and rng.random() < 0.07:
            x += rng.choice([-1, 1]) * 10 * noise
        xs.append(float(x))
    return xs


# Every p-value Otava computes, to see whether a decision hung on a p-value that equals a
# threshold in exact arithmetic (whole-number or rounded data: t² rational, e.g. p = 0.4 at
# df 2); its last bits then decide, and the two implementations' special functions round
# differently (scipy's stdtr vs statrs's beta_reg, a few ulps apart).
SEEN_P = []
_compare = otava.analysis.TTestSignificanceTester.compare


def _recording_compare(self, left, right):
    stats = _compare(self, left, right)
    SEEN_P.append(float(stats.pvalue))
    return stats


otava.analysis.TTestSignificanceTester.compare = _recording_compare


def first_pass(p):
    return p * 10 if p < 0.05 else (p * 2 if p < 0.5 else p)


def otava_points(xs, w, p, m):
    """Otava's indices, and whether some p-value was within 1e-12 (relative) of a threshold."""
    SEEN_P.clear()
    cps, _ = compute_change_points(list(xs), window_len=w, max_pvalue=p, min_magnitude=m)
    tie = any(abs(q - t) <= 1e-12 * t for q in SEEN_P for t in (p, first_pass(p)))
    return [int(c.index) for c in cps], tie


def lab(binary, folder, i, xs, w, p, m):
    path = os.path.join(folder, f"series-{i}.csv")
    with open(path, "w") as f:
        f.write("i,value\n")
        f.writelines(f"{k},{x!r}\n" for k, x in enumerate(xs))
    out = subprocess.run(
        [binary, "changes", path, "--json", "--window", str(w), "--max-pvalue", repr(p), "--min-magnitude", repr(m)],
        capture_output=True, text=True)
    if out.returncode != 0:
        return f"exit {out.returncode}: {out.stderr.strip()}"
    return [c["index"] for c in json.loads(out.stdout)["change_points"]]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    binary = os.path.abspath(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 600
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 14)
    started = time.monotonic()
    mismatches = with_points = ties = 0
    with tempfile.TemporaryDirectory() as folder:
        for i in range(count):
            kind = KINDS[i % len(KINDS)]
            xs = series(rng, kind)
            w, p, m = rng.choice(WINDOWS), rng.choice(MAX_P), rng.choice(MIN_MAG)
            expected, tie = otava_points(xs, w, p, m)
            got = lab(binary, folder, i, xs, w, p, m)
            with_points += bool(expected)
            if got != expected:
                what = "THRESHOLD TIE" if tie else "MISMATCH"
                ties += tie
                mismatches += not tie
                print(f"{what} series {i} ({kind}, n={len(xs)}, window {w}, max_p {p}, min_mag {m}): "
                      f"otava {expected}, lab {got}\n  {xs}")
    print(f"{count} series compared with apache-otava ({with_points} with change points): "
          f"{mismatches} mismatches, {ties} differing only at a p-value equal to a threshold, "
          f"{time.monotonic() - started:.1f} s")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
