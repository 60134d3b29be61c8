#!/usr/bin/env python3
"""What a notebook does with a campaign's results.csv: pandas + scipy statistics.

Usage: python3 benches/report_pandas.py RESULTS_CSV [--baseline idle]
           [--default-config default] [--confidence 0.95]
           [--gating energy_level,charge_used_mah,cpu_pct,memory_mb]

The reference side of `cargo bench --bench report_scale` (docs/report.md, "Benchmarks"):
the bench times this script, interpreter start-up and imports included, next to
`lab report`, and compares its figures with report.json. Independent of lab's code and
of report.json; it copies only lab's documented rules (docs/statistics.md):

  per (model, variant, metric) of valid attempts with finite values: n, mean, sd,
  Student t CI, median;
  each variant against the baseline build with the same config, and against the same
  build with the default config: Welch t, df, p (lab's convention when neither arm has
  spread: no t or df, p = 1 if the means are equal, else 0), Mann-Whitney U and p
  (exact when both arms have at most 25 values and no ties, else normal with continuity
  and tie correction; exact with ties is left out), and the Welch p Holm-adjusted per
  (model, variant, against) within the gating metrics and within the rest.

Prints JSON {compute_s, rows, comparisons} on stdout; compute_s leaves out start-up and
imports.
"""

import argparse
import json
import math
import sys
import time
import warnings

import numpy as np
import pandas as pd
from scipy import stats

LAB_GATING = "energy_level,charge_used_mah,cpu_pct,memory_mb"
EXACT_MAX_N = 25


def read_values(path):
    cols = ["model", "variant", "build", "config", "status", "metric", "value"]
    dtype = {c: "category" for c in cols[:-1]}
    dtype["value"] = "float64"
    df = pd.read_csv(path, usecols=cols, dtype=dtype, engine="c")
    keep = (df["status"] == "valid") & df["metric"].notna() & np.isfinite(df["value"])
    return df[keep]


def variants(df):
    """variant -> (build, config), in file order."""
    pairs = df[["variant", "build", "config"]].drop_duplicates()
    return {r.variant: (r.build, r.config) for r in pairs.itertuples(index=False)}


def references(name, build, config, all_variants, baseline, default_config):
    out = []
    if build != baseline:
        out += [v for v, (b, c) in all_variants.items() if b == baseline and c == config][:1]
    if config != default_config:
        out += [v for v, (b, c) in all_variants.items() if b == build and c == default_config][:1]
    return out


def finite_or_none(x):
    return float(x) if x is not None and math.isfinite(x) else None


def welch(t, r):
    if np.var(t, ddof=1) == 0 and np.var(r, ddof=1) == 0:
        return None, None, (1.0 if np.mean(t) == np.mean(r) else 0.0)
    res = stats.ttest_ind(t, r, equal_var=False)
    return finite_or_none(res.statistic), finite_or_none(res.df), float(res.pvalue)


def mann_whitney(t, r):
    allv = np.concatenate([t, r])
    u = float(stats.mannwhitneyu(t, r).statistic)
    if np.all(allv == allv[0]):
        return u, 1.0
    if len(t) <= EXACT_MAX_N and len(r) <= EXACT_MAX_N:
        if len(np.unique(allv)) < len(allv):
            return u, None  # lab's exact test with ties: not copied here
        return u, float(stats.mannwhitneyu(t, r, method="exact").pvalue)
    return u, float(stats.mannwhitneyu(t, r, method="asymptotic", use_continuity=True).pvalue)


def holm(ps):
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running, m = [0.0] * len(ps), 0.0, len(ps)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def summaries(df, confidence):
    g = df.groupby(["model", "variant", "metric"], observed=True)["value"]
    table = g.agg(["count", "mean", "std", "median"]).reset_index()
    rows = []
    for r in table.itertuples(index=False):
        n = int(r.count)
        row = {"model": r.model, "variant": r.variant, "metric": r.metric, "n": n,
               "mean": float(r.mean), "median": float(r.median), "sd": None, "ci_low": None, "ci_high": None}
        if n >= 2:
            half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * float(r.std) / math.sqrt(n)
            row.update(sd=float(r.std), ci_low=float(r.mean) - half, ci_high=float(r.mean) + half)
        rows.append(row)
    arrays = {k: v.to_numpy() for k, v in g}
    return rows, arrays


def comparisons(arrays, all_variants, args):
    gating = set(args.gating.split(","))
    out = []
    for (model, variant, metric), t in arrays.items():
        build, config = all_variants[variant]
        for against in references(variant, build, config, all_variants, args.baseline, args.default_config):
            r = arrays.get((model, against, metric))
            if r is None or len(t) < 2 or len(r) < 2:
                continue
            wt, wdf, wp = welch(t, r)
            u, up = mann_whitney(t, r)
            out.append({"model": model, "variant": variant, "against": against, "metric": metric,
                        "gating": metric in gating, "welch_t": wt, "welch_df": wdf, "welch_p": wp,
                        "mwu_u": u, "mwu_p": up})
    families = {}
    for c in out:
        families.setdefault((c["model"], c["variant"], c["against"], c["gating"]), []).append(c)
    for members in families.values():
        for c, p in zip(members, holm([c["welch_p"] for c in members])):
            c["p_adjusted"] = p
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results_csv")
    ap.add_argument("--baseline", default="idle", help="the baseline build")
    ap.add_argument("--default-config", default="default")
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--gating", default=LAB_GATING, help="comma-separated gating metrics")
    args = ap.parse_args()
    # scipy warns about precision when one arm is constant; the figures still agree.
    warnings.filterwarnings("ignore", message="Precision loss occurred", category=RuntimeWarning)
    start = time.perf_counter()
    df = read_values(args.results_csv)
    all_variants = variants(df)
    rows, arrays = summaries(df, args.confidence)
    comps = comparisons(arrays, all_variants, args)
    compute_s = time.perf_counter() - start
    json.dump({"compute_s": compute_s, "rows": rows, "comparisons": comps}, sys.stdout, allow_nan=False)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
