#!/usr/bin/env python3
"""Checks `lab noise --json` against scipy, from the campaigns' results.csv alone.

Usage: noise_check.py NOISE.json ARTIFACTS CAMPAIGN=VARIANT[,VARIANT]@WEEK ...

Each argument after ARTIFACTS names the arms of one campaign (the variants that measure
noise) and the campaign's week (any whole-number origin). For every series of the JSON
this recomputes, from the valid finite values of those arms: the pooled CV
(CV² = Σ(nᵢ−1)·CVᵢ²/Σ(nᵢ−1), arms of fewer than 2 values or mean 0 skipped), its χ²
interval (scipy.stats.chi2.ppf), the weekly CVs and their least-squares slope
(numpy.polyfit), and the smallest change N trials per arm detect at each power: λ by
scipy.optimize.brentq on the exact power stats.nct.sf(tc, ν, λ) + stats.nct.sf(tc, ν, −λ)
(the lower tail as sf at −λ: scipy's nct.cdf is NaN far in that tail), δ = λ·CV·√(2/N).
Exits 1 naming every figure off by more than the tolerance.
"""
import csv
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import optimize, stats

REL = 1e-9
DETECTABLE_ABS = 1e-9  # δ ≈ 0.01–2: lab's power is good to ~1e-11 absolute (statrs's Φ)


def arms_of(artifacts, spec):
    """{(model, metric): [(week, campaign, values)]} for one CAMPAIGN=V1,V2@WEEK."""
    campaign, rest = spec.split("=", 1)
    variants, week = rest.rsplit("@", 1)
    variants = set(variants.split(","))
    values = defaultdict(list)
    with open(Path(artifacts) / campaign / "results.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["status"] != "valid" or row["variant"] not in variants:
                continue
            try:
                v = float(row["value"])
            except ValueError:
                continue
            if math.isfinite(v):
                values[(row["model"], row["variant"], row["metric"])].append(v)
    out = defaultdict(list)
    for (model, _variant, metric), vs in values.items():
        out[(model, metric)].append((int(week), campaign, np.array(vs)))
    return out


def pool(arms):
    num, df, n_arms = 0.0, 0, 0
    for _week, _c, a in arms:
        if len(a) < 2 or a.mean() == 0:
            continue
        cv = a.std(ddof=1) / abs(a.mean())
        num += (len(a) - 1) * cv**2
        df += len(a) - 1
        n_arms += 1
    return (math.sqrt(num / df), df, n_arms) if df else (None, 0, 0)


def detectable(cv, n, alpha, power):
    nu = 2 * n - 2
    tc = stats.t.ppf(1 - alpha / 2, nu)

    def f(lam):
        return stats.nct.sf(tc, nu, lam) + stats.nct.sf(tc, nu, -lam) - power

    hi = 1.0
    while f(hi) < 0:
        hi *= 2
    lam = optimize.brentq(f, 0, hi, xtol=1e-14, rtol=1e-14)
    return lam * cv * math.sqrt(2 / n)


def main():
    noise = json.load(open(sys.argv[1]))
    artifacts = sys.argv[2]
    arms = defaultdict(list)
    for spec in sys.argv[3:]:
        for k, v in arms_of(artifacts, spec).items():
            arms[k].extend(v)
    alpha, conf = noise["alpha"], noise["confidence"]
    bad, checked, worst = [], 0, 0.0

    def check(what, got, want, rel=REL, abs_tol=0.0):
        nonlocal checked, worst
        checked += 1
        err = abs(got - want)
        worst = max(worst, err / abs(want) if want else err)
        if err > max(rel * abs(want), abs_tol):
            bad.append(f"{what}: lab {got!r}, scipy {want!r}")

    for s in noise["series"]:
        key = (s["model"], s["metric"])
        name = f"{key[0]} / {key[1]}"
        cv, df, n_arms = pool(arms[key])
        if cv is None:
            bad.append(f"{name}: scipy finds no arm")
            continue
        if (s["df"], s["arms"]) != (df, n_arms):
            bad.append(f"{name}: df/arms lab {s['df']}/{s['arms']}, scipy {df}/{n_arms}")
        check(f"{name}: cv", s["cv"], cv, abs_tol=1e-15)
        lo = cv * math.sqrt(df / stats.chi2.ppf((1 + conf) / 2, df))
        hi = cv * math.sqrt(df / stats.chi2.ppf((1 - conf) / 2, df))
        check(f"{name}: cv_low", s["cv_low"], lo, abs_tol=1e-15)
        check(f"{name}: cv_high", s["cv_high"], hi, abs_tol=1e-15)
        weeks = sorted({w for w, _c, _a in arms[key]})
        week_cvs = [(w, pool([x for x in arms[key] if x[0] == w])[0]) for w in weeks]
        week_cvs = [(w, c) for w, c in week_cvs if c is not None]
        if len(s["weeks"]) != len(week_cvs):
            bad.append(f"{name}: {len(s['weeks'])} weeks, scipy {len(week_cvs)}")
        for got, (_w, want) in zip(s["weeks"], week_cvs):
            check(f"{name}: week {got['iso_week']} cv", got["cv"], want, abs_tol=1e-15)
        if len(week_cvs) >= 2:
            slope = np.polyfit([w for w, _ in week_cvs], [c for _, c in week_cvs], 1)[0]
            check(f"{name}: drift", s["drift_per_week"], slope, rel=1e-7, abs_tol=1e-15)
        elif s["drift_per_week"] is not None:
            bad.append(f"{name}: a drift from one week")
        for d in s["detectable"]:
            want = detectable(cv, d["trials_per_arm"], alpha, d["power"])
            check(f"{name}: n {d['trials_per_arm']} power {d['power']}", d["change"], want, abs_tol=DETECTABLE_ABS)
    print(f"{checked} figures of {len(noise['series'])} series checked; largest relative error {worst:.1e}")
    for b in bad:
        print(b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
