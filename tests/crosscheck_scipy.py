#!/usr/bin/env python3
"""Recompute a campaign's statistics with scipy and compare them with report.json.

Usage: python3 tests/crosscheck_scipy.py ARTIFACTS/CAMPAIGN [--rel 1e-9]

Reads the campaign's results.csv (every measurement) and report.json (what lab
computed), recomputes from the raw values, independently of lab's code:

  per model x variant x metric: n, mean, sd, Student t CI, median, min, max;
  per comparison: Welch t, df and p (scipy.stats.ttest_ind, equal_var=False),
  Mann-Whitney U and p (scipy.stats.mannwhitneyu exact or asymptotic, or for an
  exact test with ties scipy.stats.permutation_test over every permutation),
  the relative change and its log-ratio CI, and the Holm-adjusted p-values;

and checks every figure to a relative tolerance of 1e-9. Exits 1 listing every
mismatch, 0 otherwise; prints how many figures were checked.

Conventions lab documents (docs/statistics.md) where scipy returns NaN:
  - both arms without spread: Welch p = 1 if the means are equal, else 0; no t, no df;
  - every value tied: Mann-Whitney p = 1.
"""

import csv
import json
import math
import sys
import warnings
from collections import defaultdict

import numpy as np
import scipy
from scipy import stats

# Exact tie-aware Mann-Whitney via scipy's permutation test enumerates C(N, n1)
# splits; above this many the check uses a generating-function count instead.
MAX_ENUMERATION = 2_000_000


class Checker:
    def __init__(self, rel):
        self.rel = rel
        self.checked = 0
        self.failures = []
        self.max_rel = 0.0

    def close(self, where, what, got, want, abs_tol=0.0):
        """Compares lab's figure `got` with scipy's `want` (None = must be absent)."""
        self.checked += 1
        if want is None or got is None:
            if want is not None or got is not None:
                self.failures.append(f"{where}: {what}: lab {got!r}, scipy {want!r}")
            return
        if not math.isfinite(want):
            self.failures.append(f"{where}: {what}: scipy gave {want!r} (lab {got!r})")
            return
        err = abs(got - want)
        scale = abs(want)
        rel = err / scale if scale > 0 else (0.0 if err == 0 else math.inf)
        if err > abs_tol:
            self.max_rel = max(self.max_rel, rel)
        if err > max(self.rel * scale, abs_tol):
            self.failures.append(f"{where}: {what}: lab {got!r}, scipy {want!r} (relative error {rel:.2e})")


def read_values(path):
    """(model, variant, metric) -> values of valid attempts, in file order."""
    values = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["status"] != "valid" or not row["metric"]:
                continue
            v = float(row["value"])
            if math.isfinite(v):
                values[(row["model"], row["variant"], row["metric"])].append(v)
    return values


def check_summary(c, where, s, xs, confidence):
    x = np.array(xs, dtype=float)
    n = len(x)
    c.close(where, "n", s["n"], n)
    c.close(where, "mean", s["mean"], float(np.mean(x)), abs_tol=1e-12 * max(1.0, abs(float(np.max(np.abs(x))))))
    c.close(where, "median", s["median"], float(np.median(x)))
    c.close(where, "min", s["min"], float(np.min(x)))
    c.close(where, "max", s["max"], float(np.max(x)))
    if n < 2:
        c.close(where, "sd", s["sd"], None)
        return
    sd = float(np.std(x, ddof=1))
    scale_tol = 1e-12 * max(1.0, abs(float(np.mean(x))))
    c.close(where, "sd", s["sd"], sd, abs_tol=scale_tol)
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
    c.close(where, "ci_low", s["ci_low"], float(np.mean(x)) - half, abs_tol=scale_tol)
    c.close(where, "ci_high", s["ci_high"], float(np.mean(x)) + half, abs_tol=scale_tol)


def welch(t, r):
    """scipy's Welch test, with lab's convention for two arms without spread."""
    if np.var(t, ddof=1) == 0 and np.var(r, ddof=1) == 0:
        return None, None, (1.0 if np.mean(t) == np.mean(r) else 0.0)
    res = stats.ttest_ind(t, r, equal_var=False)
    return float(res.statistic), float(res.df), float(res.pvalue)


def mwu_u(t, r, axis=-1):
    return stats.mannwhitneyu(t, r, axis=axis).statistic


def exact_tied_p_by_counting(t, r):
    """Two-sided exact p of U given the ties, by counting splits of the mid-ranks with
    a generating function (numpy polynomial products); for samples too large to
    enumerate with permutation_test."""
    ranks = stats.rankdata(np.concatenate([t, r]))
    doubled = (2 * ranks).astype(int)
    n1 = len(t)
    values, counts = np.unique(doubled, return_counts=True)
    total = int(doubled.sum())
    # poly[k][s]: ways to pick k values with doubled rank sum s.
    poly = np.zeros((n1 + 1, total + 1))
    poly[0][0] = 1.0
    for v, m in zip(values, counts):
        new = np.zeros_like(poly)
        for c_ in range(0, min(m, n1) + 1):
            ways = math.comb(int(m), c_)
            shift = c_ * int(v)
            new[c_:, shift:] += ways * poly[: n1 + 1 - c_, : total + 1 - shift]
        poly = new
    dist = poly[n1]
    obs = int(round(2 * ranks[:n1].sum()))
    lower = dist[: obs + 1].sum() / dist.sum()
    upper = dist[obs:].sum() / dist.sum()
    return min(1.0, 2 * min(lower, upper))


def mann_whitney(t, r, method):
    u = float(mwu_u(t, r))
    allv = np.concatenate([t, r])
    if np.all(allv == allv[0]):
        return u, 1.0
    ties = len(np.unique(allv)) < len(allv)
    if method == "normal":
        return u, float(stats.mannwhitneyu(t, r, method="asymptotic", use_continuity=True).pvalue)
    if not ties:
        return u, float(stats.mannwhitneyu(t, r, method="exact").pvalue)
    if math.comb(len(allv), len(t)) <= MAX_ENUMERATION:
        res = stats.permutation_test(
            (t, r),
            lambda a, b, axis: mwu_u(a, b, axis=axis),
            permutation_type="independent",
            n_resamples=np.inf,
            alternative="two-sided",
            vectorized=True,
        )
        return u, float(res.pvalue)
    return u, exact_tied_p_by_counting(t, r)


def relative_change(t, r, confidence):
    mt, mr = float(np.mean(t)), float(np.mean(r))
    vt, vr = float(np.var(t, ddof=1)), float(np.var(r, ddof=1))
    nt, nr = len(t), len(r)
    if mt > 0 and mr > 0:
        a, b = vt / (nt * mt * mt), vr / (nr * mr * mr)
        delta = mt / mr - 1
        if a + b == 0:
            return delta, delta, delta
        df = (a + b) ** 2 / (a * a / (nt - 1) + b * b / (nr - 1))
        half = float(stats.t.ppf((1 + confidence) / 2, df)) * math.sqrt(a + b)
        return delta, math.exp(math.log(mt / mr) - half) - 1, math.exp(math.log(mt / mr) + half) - 1
    a, b = vt / nt, vr / nr
    delta = (mt - mr) / abs(mr)
    if a + b == 0:
        return delta, delta, delta
    df = (a + b) ** 2 / (a * a / (nt - 1) + b * b / (nr - 1))
    half = float(stats.t.ppf((1 + confidence) / 2, df)) * math.sqrt(a + b) / abs(mr)
    return delta, delta - half, delta + half


def holm(ps):
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running, m = [0.0] * len(ps), 0.0, len(ps)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def main():
    # scipy warns about precision when one arm is constant; the figures still agree.
    warnings.filterwarnings("ignore", message="Precision loss occurred", category=RuntimeWarning)
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    folder = args[0]
    rel = float(args[args.index("--rel") + 1]) if "--rel" in args else 1e-9
    values = read_values(f"{folder}/results.csv")
    with open(f"{folder}/report.json") as f:
        report = json.load(f)
    confidence = report["statistics"]["confidence"]
    gating = set(report["statistics"]["gating"])
    c = Checker(rel)
    comparisons = 0
    for model in report["models"]:
        name = model["model"]
        families = defaultdict(list)  # (variant, against, gating) -> [(lab p adj, scipy welch p)]
        for row in model["rows"]:
            where = f"{name} / {row['variant']} / {row['metric']}"
            xs = values.get((name, row["variant"], row["metric"]), [])
            if row["stats"] is None:
                c.close(where, "n", row["n"], len(xs))
                continue
            check_summary(c, where, row["stats"], xs, confidence)
            for cmp in row["comparisons"]:
                comparisons += 1
                w = f"{where} vs {cmp['against']}"
                t = np.array(xs, dtype=float)
                r = np.array(values[(name, cmp["against"], row["metric"])], dtype=float)
                c.close(w, "n_baseline", cmp["n_baseline"], len(r))
                if len(t) >= 2 and len(r) >= 2:
                    tt, df, p = welch(t, r)
                    lw = cmp["welch"]
                    c.close(w, "welch t", lw["t"], tt)
                    c.close(w, "welch df", lw["df"], df)
                    c.close(w, "welch p", lw["p"], p)
                    fam = (row["variant"], cmp["against"], row["metric"] in gating)
                    families[fam].append((w, cmp["p_adjusted"], p))
                    if cmp["change"] is not None and np.mean(r) != 0:
                        d, lo, hi = relative_change(t, r, confidence)
                        tol = 1e-12 * max(1.0, abs(d))
                        c.close(w, "delta", cmp["change"]["delta"], d, abs_tol=tol)
                        c.close(w, "delta ci_low", cmp["change"]["ci_low"], lo, abs_tol=tol)
                        c.close(w, "delta ci_high", cmp["change"]["ci_high"], hi, abs_tol=tol)
                mw = cmp["mann_whitney"]
                u, p = mann_whitney(t, r, mw["method"])
                c.close(w, "mann-whitney U", mw["u"], u)
                c.close(w, "mann-whitney p", mw["p"], p)
        for members in families.values():
            for (w, got, _), want in zip(members, holm([m[2] for m in members])):
                c.close(w, "holm p", got, want)
    print(
        f"crosscheck {folder}: {c.checked} figures ({comparisons} comparisons) checked against scipy "
        f"{scipy.__version__} at relative tolerance {rel:g}; "
        f"largest relative error {c.max_rel:.2e}"
    )
    if c.failures:
        print(f"{len(c.failures)} mismatch(es):")
        for f_ in c.failures:
            print("  " + f_)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
