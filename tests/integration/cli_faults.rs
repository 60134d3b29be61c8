//! Fault injection: charging during the soak, a lost device and cache hits make
//! attempts invalid with the right reason, and they are retried.

use crate::common;

use common::{TempLab, root};

#[test]
fn faulty_trials_are_invalid_with_their_reason_and_retried() {
    let lab = TempLab::from_file(&root().join("tests/fixtures/faulty-lab.toml"));
    // The `cached` build fails every attempt: exit 4 (trials failed).
    lab.cmd(&["run", "tests/fixtures/faults.toml"]).assert().code(4);

    let rows: Vec<String> = lab.sql(
        "SELECT t.build || '|' || a.trial_idx || '|' || a.attempt || '|' || a.status || '|' || a.reasons
         FROM attempts a JOIN trials t ON t.campaign = a.campaign AND t.idx = a.trial_idx ORDER BY a.trial_idx, a.attempt",
    );
    let parsed: Vec<(String, u32, u32, String, String)> = rows
        .iter()
        .map(|r| {
            let p: Vec<&str> = r.splitn(5, '|').collect();
            (p[0].into(), p[1].parse().unwrap(), p[2].parse().unwrap(), p[3].into(), p[4].into())
        })
        .collect();
    let retried = |idx: u32, attempt: u32| parsed.iter().any(|r| r.1 == idx && r.2 == attempt + 1);

    let mut seen = [0; 3];
    for (build, idx, attempt, status, reasons) in &parsed {
        if build == "cached" {
            assert_eq!(status, "invalid");
            assert!(reasons.contains("requests, saw") && reasons.contains("cache"), "{reasons}");
            seen[0] += 1;
        } else if reasons.contains("charged during the soak") {
            seen[1] += 1;
        } else if reasons.contains("lost") {
            seen[2] += 1;
        } else {
            assert_eq!(status, "valid", "{reasons}");
            continue;
        }
        assert_eq!(status, "invalid");
        if *attempt < 3 {
            assert!(retried(*idx, *attempt), "trial {idx} attempt {attempt} was retried");
        }
    }
    assert!(seen.iter().all(|&n| n > 0), "every fault kind occurred: {seen:?}");
    // Every `cached` trial used all four attempts; every `good` trial ended valid.
    let cached_attempts: Vec<i64> = lab.sql(
        "SELECT COUNT(*) FROM attempts a JOIN trials t ON t.campaign = a.campaign AND t.idx = a.trial_idx WHERE t.build = 'cached'",
    );
    assert_eq!(cached_attempts, [12 * 4]);
    // Every `good` trial ends valid unless the faults hit all four of its attempts.
    for idx in parsed.iter().filter(|r| r.0 == "good").map(|r| r.1).collect::<std::collections::BTreeSet<_>>() {
        let attempts: Vec<_> = parsed.iter().filter(|r| r.1 == idx).collect();
        let valid = attempts.iter().filter(|r| r.3 == "valid").count();
        assert!(
            (valid == 1 && attempts.last().unwrap().3 == "valid") || (valid == 0 && attempts.len() == 4),
            "trial {idx}: {attempts:?}"
        );
    }
    let good_valid: Vec<i64> = lab.sql(
        "SELECT COUNT(DISTINCT a.trial_idx) FROM attempts a JOIN trials t ON t.campaign = a.campaign AND t.idx = a.trial_idx
         WHERE t.build = 'good' AND a.status = 'valid'",
    );
    assert!(good_valid[0] >= 10, "retries rescue most faulty trials: {good_valid:?}");
}
