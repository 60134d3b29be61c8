//! `lab noise` through the binary: the quickstart's history (three campaigns in two weeks)
//! checked against scipy by tests/noise_check.py, a store with an A/A campaign (both of
//! its arms count; a copy that differs does not), and bad input.

use crate::common;

use std::process::Command;

use common::{TempLab, root};

fn stdout(lab: &TempLab, args: &[&str]) -> String {
    let out = lab.cmd(args).assert().success().get_output().clone();
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `runbook` (a file of runbooks/) with each `(from, to)` replaced in its text.
fn run(lab: &TempLab, runbook: &str, edits: &[(&str, &str)]) {
    let mut text = std::fs::read_to_string(root().join("runbooks").join(runbook)).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{runbook} has `{from}`");
        text = text.replace(from, to);
    }
    let file = lab.dir.path().join(runbook);
    std::fs::write(&file, text).unwrap();
    lab.cmd(&["run", file.to_str().unwrap()]).assert().success();
}

/// Moves campaign `id` to `created_at` (campaigns run in a test are all in this week).
fn backdate(lab: &TempLab, id: &str, created_at: &str) {
    let conn = rusqlite::Connection::open(lab.store()).unwrap();
    conn.execute("UPDATE campaigns SET created_at = ?1 WHERE id = ?2", [created_at, id]).unwrap();
}

/// Campaign ids come from the wall clock: each named by its part instead, the longer ids
/// first (`X-2` contains `X` when two start in one second).
fn redacted(text: &str, names: &[(&str, &str)]) -> String {
    let mut names = names.to_vec();
    names.sort_by_key(|(id, _)| std::cmp::Reverse(id.len()));
    names.iter().fold(text.to_string(), |out, (id, name)| out.replace(id, name))
}

/// tests/noise_check.py on `lab noise --json`'s output in `file`, with the arms of each campaign.
fn noise_check(file: &std::path::Path, lab: &TempLab, arms: &[String]) -> std::process::Output {
    let script = root().join("tests/noise_check.py");
    Command::new("python3").arg(script).arg(file).arg(lab.artifacts()).args(arms).output().expect("python3 runs")
}

#[test_needs::needs(scipy)]
#[test]
fn quickstart_history_matches_scipy() {
    crate::crosscheck::scipy_available();
    let lab = TempLab::new();
    for seed in 1..=3 {
        run(&lab, "quickstart.toml", &[("seed = 7", &format!("seed = {seed}"))]);
    }
    let campaigns = lab.campaigns();
    // Oldest first: two weeks apart, then the third a week after that.
    let (c1, c2, c3) = (&campaigns[2], &campaigns[1], &campaigns[0]);
    backdate(&lab, c1, "2026-01-06T10:00:00Z");
    backdate(&lab, c2, "2026-01-20T10:00:00Z");
    backdate(&lab, c3, "2026-01-21T10:00:00Z");

    let json = stdout(&lab, &["noise", "--json", "--trials", "4", "--trials", "12"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["campaigns_read"], 3);
    let series = v["series"].as_array().unwrap();
    let cpu = series.iter().find(|s| s["model"] == "iPhone 6s" && s["metric"] == "cpu_pct").unwrap();
    // The idle build's arm of each campaign: 4 trials per model.
    assert_eq!((cpu["arms"].as_u64(), cpu["aa_arms"].as_u64(), cpu["trials"].as_u64()), (Some(3), Some(0), Some(12)));
    let weeks: Vec<&str> = cpu["weeks"].as_array().unwrap().iter().map(|w| w["iso_week"].as_str().unwrap()).collect();
    assert_eq!(weeks, ["2026-W02", "2026-W04"]);
    assert!(cpu["drift_per_week"].is_f64(), "two weeks have a slope: {cpu}");

    let file = lab.dir.path().join("noise.json");
    std::fs::write(&file, &json).unwrap();
    // Weeks from the Monday of 1970-01-05, as lab counts them.
    let arms = [format!("{c1}=idle@2922"), format!("{c2}=idle@2924"), format!("{c3}=idle@2924")];
    let out = noise_check(&file, &lab, &arms);
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("of {} series checked", series.len())), "{text}");

    // The check can fail: a CV off by 1e-6 relative is named.
    let mut tampered = v.clone();
    let cv = tampered["series"][0]["cv"].as_f64().unwrap();
    tampered["series"][0]["cv"] = serde_json::json!(cv * (1.0 + 1e-6));
    std::fs::write(&file, tampered.to_string()).unwrap();
    let out = noise_check(&file, &lab, &arms);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(": cv: lab"), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn both_arms_of_an_aa_campaign_count_and_a_changed_copy_does_not() {
    let lab = TempLab::new();
    run(&lab, "aa-identical.toml", &[]);
    let aa = lab.campaigns()[0].clone();
    // The copy's CPU differs: its build hash differs, so only the baseline arm counts.
    run(&lab, "aa-identical.toml", &[("[builds.a-copy.sim]\ncpu_pct = 20", "[builds.a-copy.sim]\ncpu_pct = 21")]);
    // Two campaigns may start in one second: the new one is the id that is not `aa`.
    let changed = lab.campaigns().into_iter().find(|c| *c != aa).unwrap();

    let json = stdout(&lab, &["noise", "--metric", "cpu_pct", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let series = v["series"].as_array().unwrap();
    assert_eq!(series.len(), 2, "one per model: {json}");
    for s in series {
        // aa: a and a-copy, 6 trials each per model; changed: a only.
        assert_eq!((s["arms"].as_u64(), s["aa_arms"].as_u64(), s["trials"].as_u64()), (Some(3), Some(1), Some(18)));
        let from: Vec<&str> = s["campaigns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        let mut want = [aa.as_str(), changed.as_str()];
        want.sort_unstable();
        assert_eq!(from, want);
    }
    let table = stdout(&lab, &["noise", "--metric", "cpu_pct", "--model", "Pixel 5", "--trials", "6"]);
    insta::assert_snapshot!("aa_cpu_table", redacted(&table, &[(&aa, "[A/A]"), (&changed, "[changed copy]")]));
}

#[test]
fn bad_input_is_named_with_its_fix_and_exits_2() {
    let lab = TempLab::new();
    let mut transcript = String::new();
    let mut attempt = |lab: &TempLab, args: &[&str]| {
        let out = lab.cmd(args).assert().code(2).get_output().clone();
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr).replace(lab.dir.path().to_str().unwrap(), "[lab]");
        transcript += &format!("$ lab {}\n{stderr}", args.join(" "));
    };
    attempt(&lab, &["noise"]);
    assert!(!lab.store().exists(), "nothing was written");
    run(&lab, "quickstart.toml", &[("repeats = 4", "repeats = 1")]);
    let before = std::fs::metadata(lab.store()).unwrap().modified().unwrap();
    attempt(&lab, &["noise", "--model", "Pixel 9"]);
    attempt(&lab, &["noise", "--model", "Pixel 5", "--metric", "cpu"]);
    attempt(&lab, &["noise", "--model", "Pixel 5", "--metric", "cpu_pct"]);
    attempt(&lab, &["noise", "--trials", "1"]);
    attempt(&lab, &["noise", "--alpha", "5"]);
    assert_eq!(std::fs::metadata(lab.store()).unwrap().modified().unwrap(), before, "the store is untouched");
    insta::assert_snapshot!("bad_input", transcript);
}
