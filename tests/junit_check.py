#!/usr/bin/env python3
"""Checks a `lab report|compare --format junit` file as CI servers will read it.

    junit_check.py SCHEMA XML [--failure CASE]... [--skipped CASE]... [--tests N]

CASE is `classname::name`. (a) XML must be valid against SCHEMA (the Jenkins xUnit
plugin's junit-10.xsd, tests/fixtures/junit/) with PyPI `xmlschema`; (b) read back with
PyPI `junitparser`, the failed cases must be exactly the --failure ones and the skipped
cases exactly the --skipped ones, each suite's tests/failures/errors/skipped attributes
must count its cases, and a failure's message must state Δ, the CI and the p-value.
Prints one line per suite and exits 1 with every problem listed.
"""

import argparse
import sys

import junitparser
import xmlschema


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("schema")
    ap.add_argument("xml")
    ap.add_argument("--failure", action="append", default=[])
    ap.add_argument("--skipped", action="append", default=[])
    ap.add_argument("--tests", type=int)
    args = ap.parse_args()

    problems = []
    schema = xmlschema.XMLSchema(args.schema)
    for e in schema.iter_errors(args.xml):
        problems.append(f"schema: {e.reason} at {e.path}")

    doc = junitparser.JUnitXml.fromfile(args.xml)
    suites = [doc] if isinstance(doc, junitparser.TestSuite) else list(doc)
    failed, skipped, total, names = set(), set(), 0, []
    for suite in suites:
        cases = list(suite)
        f = [c for c in cases if c.is_failure]
        s = [c for c in cases if c.is_skipped]
        counts = {"tests": len(cases), "failures": len(f), "errors": 0, "skipped": len(s)}
        for attr, want in counts.items():
            got = getattr(suite, attr)
            if got != want:
                problems.append(f"suite {suite.name!r}: {attr}={got}, its cases say {want}")
        if not suite.timestamp:
            problems.append(f"suite {suite.name!r}: no timestamp")
        for c in cases:
            key = f"{c.classname}::{c.name}"
            names.append(key)
            if c.is_failure:
                failed.add(key)
                message = c.result[0].message or ""
                for needed in ("Δ", "CI", "p = "):
                    if needed not in message:
                        problems.append(f"{key}: failure message lacks {needed!r}: {message}")
            if c.is_skipped:
                skipped.add(key)
                if not (c.result[0].message or "").strip():
                    problems.append(f"{key}: skipped without a reason")
        total += len(cases)
        print(f"{suite.name}: {len(cases)} cases, {len(f)} failures, {len(s)} skipped")

    if len(set(names)) != len(names):
        problems.append(f"case names repeat: {sorted(n for n in set(names) if names.count(n) > 1)}")
    for label, got, want in (("failures", failed, set(args.failure)), ("skipped", skipped, set(args.skipped))):
        if got != want:
            problems.append(
                f"{label}: unexpected {sorted(got - want)}, missing {sorted(want - got)} (cases: {sorted(names)})"
            )
    if args.tests is not None and total != args.tests:
        problems.append(f"{total} cases, expected {args.tests}")
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
