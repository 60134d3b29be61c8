#!/usr/bin/env python3
"""An independent check of lab's group-sequential crossing probabilities
(src/stats/group_sequential.rs) with scipy: under H0 the z statistics at information
fractions t_1 < ... < t_K are multivariate normal with corr(Z_i, Z_j) = sqrt(t_i / t_j)
(i <= j), so the probability of crossing +-b_k at any look is
1 - P(|Z_k| < b_k for all k), a rectangle probability of scipy's multivariate normal
(Genz's algorithm: nothing in common with lab's recursive integration).

Usage: group_sequential_check.py < cases.json, cases [[bounds], [fractions]];
prints the total crossing probability of each, one JSON list.
Run by tests/integration/crosscheck.rs (docs/statistics.md).
"""
import json
import sys

import numpy as np
from scipy.stats import multivariate_normal

out = []
for bounds, t in json.load(sys.stdin):
    k = len(t)
    cov = np.array([[np.sqrt(min(t[i], t[j]) / max(t[i], t[j])) for j in range(k)] for i in range(k)])
    b = np.array(bounds)
    inside = multivariate_normal(mean=np.zeros(k), cov=cov, abseps=1e-7, releps=1e-7, maxpts=2_000_000).cdf(
        b, lower_limit=-b
    )
    out.append(1.0 - float(inside))
print(json.dumps(out))
