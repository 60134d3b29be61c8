//! Sequential campaigns (`repeats = { min, max, stop = "decided" }`, issue 34) through the
//! real binary on the default lab's simulated phones: an A/A check over 60 seeds, a change
//! decided early with the report saying when, freed devices going to the variant still
//! undecided, and `lab plan`'s device-hours.

use crate::common;

use common::TempLab;
use serde_json::Value;

const SEEDS: u64 = 60;
const SEQUENTIAL: &str = "repeats = { min = 3, max = 12, stop = \"decided\" }";

fn aa_text(seed: u64) -> String {
    let text = std::fs::read_to_string(common::root().join("runbooks/aa-identical.toml")).unwrap();
    assert!(text.contains("\nrepeats = 6\n") && text.contains("\nseed = 1\n"));
    text.replace("\nrepeats = 6\n", &format!("\n{SEQUENTIAL}\n")).replace("\nseed = 1\n", &format!("\nseed = {seed}\n"))
}

/// The A/A runbook (seed 3) with two more builds: `busy` (50 % more CPU) and `edge` (5 %
/// more: on the threshold), gated on CPU and memory.
pub(crate) fn three_variants() -> String {
    aa_text(3)
        .replace("name = \"aa-identical\"", "name = \"sequential\"")
        .replace(
            "[workload]",
            "[builds.busy]\n[builds.busy.sim]\ncpu_pct = 30\nwakeups_per_s = 50\nmemory_mb = 30\n\n\
             [builds.edge]\n[builds.edge.sim]\ncpu_pct = 21\nwakeups_per_s = 50\nmemory_mb = 30\n\n[workload]",
        )
        .replace("[statistics]\n", "[statistics]\ngating = [\"cpu_pct\", \"memory_mb\"]\n")
}

fn report(lab: &TempLab, seed: u64) -> Value {
    let id = lab.sql::<String>(&format!("SELECT id FROM campaigns WHERE seed = {seed}")).pop().expect("the campaign");
    serde_json::from_str(&std::fs::read_to_string(lab.artifacts().join(&id).join("report.json")).unwrap()).unwrap()
}

fn events(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The A/A runbook with `stop = "decided"` over 60 seeds: a `worse`/`better` verdict is a
/// false positive. Each seed × model's gating family is one group-sequential test at
/// α = 0.05; 120 of them have a Monte-Carlo sd of 2 points at 5 %, so the bound below
/// (at most 5 %) is the issue's, with the design's α well inside it (0 seen so far).
#[test]
fn identical_builds_stop_the_same_and_rarely_get_a_verdict() {
    let lab = TempLab::new();
    let (mut pairs, mut false_positive, mut same, mut early, mut decided_events) = (0, 0, 0, 0, 0);
    let mut trials_used = 0;
    for seed in 1..=SEEDS {
        let path = lab.dir.path().join(format!("aa-{seed}.toml"));
        std::fs::write(&path, aa_text(seed)).unwrap();
        let out = lab
            .cmd(&["run", path.to_str().unwrap(), "--message-format", "json"])
            .assert()
            .success()
            .get_output()
            .clone();
        let decided: Vec<Value> = events(&out.stdout).into_iter().filter(|e| e["event"] == "variant_decided").collect();
        decided_events += decided.len();
        let report = report(&lab, seed);
        for model in report["models"].as_array().unwrap() {
            let v = &model["verdicts"][0];
            assert_eq!((v["variant"].as_str(), v["against"].as_str()), (Some("a-copy"), Some("a")));
            let stop = &v["sequential"];
            assert!(stop.is_object(), "a sequential campaign's verdict says where it stopped: {v}");
            pairs += 1;
            false_positive += usize::from(v["verdict"] == "worse" || v["verdict"] == "better");
            same += usize::from(v["verdict"] == "same");
            let n = stop["n_treatment"].as_u64().unwrap();
            trials_used += n;
            early += usize::from(n < 12);
            // The event said the same as the report.
            let e = decided.iter().find(|e| e["model"] == model["model"]).expect("a variant_decided event per model");
            assert_eq!(e["verdict"], v["verdict"]);
            assert_eq!(e["trials"], stop["n_treatment"]);
        }
    }
    eprintln!(
        "sequential A/A over {SEEDS} seeds: {false_positive}/{pairs} worse/better, {same}/{pairs} same, {early}/{pairs} \
stopped before max; {:.1} trials per arm on average (max 12)",
        trials_used as f64 / pairs as f64
    );
    assert_eq!(pairs, 2 * SEEDS as usize);
    assert_eq!(decided_events, pairs);
    assert!(false_positive as f64 / pairs as f64 <= 0.05, "false positives {false_positive}/{pairs}");
    assert!(same * 2 > pairs, "mostly same: {same}/{pairs}");
    assert!(early * 2 > pairs, "mostly before max: {early}/{pairs}");
}

/// Three variants against the baseline: `busy` (50 % more CPU) is decided `worse` at an
/// early look and stops; `edge` (5 % more: on the threshold, where neither a change beyond
/// it nor equivalence within it can be shown) keeps running, and the baseline with it,
/// while its looks last. The report says when each was decided, the stored plan keeps the
/// looks, and `lab report`, rebuilt from the store, says the same.
#[test]
fn a_change_is_decided_early_and_its_devices_go_to_the_undecided_variant() {
    let lab = TempLab::new();
    let path = lab.dir.path().join("sequential.toml");
    std::fs::write(&path, three_variants()).unwrap();
    let out = lab.cmd(&["run", path.to_str().unwrap()]).assert().success().get_output().clone();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let report = report(&lab, 3);
    let id = report["campaign"]["id"].as_str().unwrap().to_string();
    for model in report["models"].as_array().unwrap() {
        let verdict = |variant: &str| -> &Value {
            model["verdicts"].as_array().unwrap().iter().find(|v| v["variant"] == variant).unwrap()
        };
        let (busy, edge) = (verdict("busy"), verdict("edge"));
        assert_eq!(busy["verdict"], "worse", "{busy}");
        let (b, e) = (&busy["sequential"], &edge["sequential"]);
        let busy_at = b["decided_at"].as_u64().unwrap();
        assert!(e["decided_at"].as_u64().is_none_or(|at| at > busy_at), "{b} {e}");
        assert!(b["n_treatment"].as_u64().unwrap() < 12, "busy stopped before max: {b}");
        assert!(e["n_treatment"].as_u64().unwrap() > b["n_treatment"].as_u64().unwrap(), "{b} {e}");
        assert!(b["fixed_trials"].as_u64().is_some(), "{b}");
        // Trials as planned: busy stopped at its look; the baseline ran as long as any other.
        let planned = |variant: &str| -> i64 {
            lab.sql::<i64>(&format!(
                "SELECT COUNT(*) FROM trials WHERE campaign = '{id}' AND variant = '{variant}' AND device_model = '{}'",
                model["model"].as_str().unwrap()
            ))[0]
        };
        assert_eq!(planned("busy") as u64, b["n_treatment"].as_u64().unwrap(), "no trial of busy after its decision");
        assert_eq!(planned("a"), planned("a-copy").max(planned("busy")).max(planned("edge")));
        assert_eq!(planned("edge") as u64, e["n_treatment"].as_u64().unwrap());
        // busy is judged on the data of the look that stopped it, though `a` ran on for edge.
        assert_eq!(b["look"], b["decided_at"], "{b}");
        assert!((b["n_reference"].as_i64().unwrap()) < planned("a"), "{b}");
    }
    // One event per stopped pair and model, however many looks follow for the others.
    for (pair, n) in
        [("busy vs a: worse at look", 2), ("edge vs a: inconclusive at look", 2), ("a-copy vs a: same at look", 2)]
    {
        assert_eq!(stdout.matches(pair).count(), n, "{pair} in:\n{stdout}");
    }
    assert!(stdout.contains("busy vs a: worse at look"), "{stdout}");
    assert!(stdout.contains("    decided at look"), "{stdout}");
    // The looks are kept with the plan; `lab report` rebuilt from the store says the same.
    let plan: Value =
        serde_json::from_str(&lab.sql::<String>(&format!("SELECT plan_json FROM campaigns WHERE id = '{id}'"))[0])
            .unwrap();
    let looks = plan["looks"].as_array().unwrap();
    assert!(looks.iter().any(|l| l["variant"] == "busy" && l["verdict"] == "worse"), "{looks:?}");
    let again = lab.cmd(&["report", &id]).assert().success().get_output().stdout.clone();
    let again = String::from_utf8_lossy(&again);
    // The verdict lines and, under each, when it was decided.
    let lines = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| {
                l.starts_with("verdicts (") || (l.starts_with("  ") && (l.contains(" vs a: ") || l.contains(" look")))
            })
            .map(str::to_string)
            .collect()
    };
    assert_eq!(lines(&again), lines(&stdout));
    insta::assert_snapshot!(lines(&stdout).join("\n"));
}

#[test]
fn lab_plan_shows_a_sequential_runbooks_device_hours() {
    let lab = TempLab::new();
    let path = lab.dir.path().join("aa.toml");
    std::fs::write(&path, aa_text(1)).unwrap();
    let out = lab.cmd(&["plan", path.to_str().unwrap()]).assert().success().get_output().stdout.clone();
    let line = String::from_utf8_lossy(&out).lines().find(|l| l.starts_with("sequential repeats")).unwrap().to_string();
    // 2 variants × 2 models × 12 trials of 31 minutes: 24.8 device-hours at most.
    assert!(line.contains("device-hours at most 24.8, expected "), "{line}");
    insta::assert_snapshot!(line);
}

/// `kill -9` after a sequential campaign's first look added trials, then `lab run
/// --resume`: every planned trial ends with one valid attempt, no block is planned twice
/// (`edge` ends at exactly `max` on each model), the looks already stored are kept and
/// later ones follow them, and the verdicts are the uninterrupted campaign's.
#[test]
fn a_sequential_campaign_killed_between_looks_resumes_without_repeating_a_block() {
    use std::time::{Duration, Instant};
    let lab = TempLab::new();
    let path = lab.dir.path().join("sequential.toml");
    std::fs::write(&path, three_variants()).unwrap();
    let mut child = lab.process(&["run", path.to_str().unwrap()]).stdout(std::process::Stdio::null()).spawn().unwrap();
    // The first round plans 3 per variant per model: 4 × 3 × 2 = 24 trials.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let trials = lab.try_sql::<i64>("SELECT COUNT(*) FROM trials").ok().and_then(|v| v.first().copied());
        let valid = lab.try_sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'").ok();
        if let (Some(t), Some(v)) = (trials, valid.and_then(|v| v.first().copied()))
            && t > 24
            && v < t
        {
            break;
        }
        assert!(Instant::now() < deadline, "the campaign never took its first look");
        assert!(child.try_wait().unwrap().is_none(), "lab run ended before it could be killed");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let id = lab.campaigns()[0].clone();
    let plan_looks = |lab: &TempLab| -> Vec<Value> {
        let plan: Value =
            serde_json::from_str(&lab.sql::<String>(&format!("SELECT plan_json FROM campaigns WHERE id = '{id}'"))[0])
                .unwrap();
        plan["looks"].as_array().cloned().unwrap_or_default()
    };
    let before = plan_looks(&lab);
    assert!(!before.is_empty(), "the first look was stored before its trials ran");
    lab.cmd(&["run", "--resume", &id]).assert().success();

    let after = plan_looks(&lab);
    assert_eq!(&after[..before.len()], &before[..], "stored looks are kept as they were");
    let valid_per_trial: Vec<i64> = lab.sql(&format!(
        "SELECT COUNT(a.trial_idx) FROM trials t LEFT JOIN attempts a ON a.campaign = t.campaign \
         AND a.trial_idx = t.idx AND a.status = 'valid' WHERE t.campaign = '{id}' GROUP BY t.idx"
    ));
    assert!(valid_per_trial.iter().all(|&n| n == 1), "one valid attempt per trial: {valid_per_trial:?}");
    let edge: Vec<i64> = lab.sql(&format!(
        "SELECT COUNT(*) FROM trials WHERE campaign = '{id}' AND variant = 'edge' GROUP BY device_model"
    ));
    assert_eq!(edge, [12, 12], "edge runs to max, no block twice");
    // The same verdicts as the campaign that was never killed.
    let whole = TempLab::new();
    let whole_path = whole.dir.path().join("sequential.toml");
    std::fs::write(&whole_path, three_variants()).unwrap();
    whole.cmd(&["run", whole_path.to_str().unwrap()]).assert().success();
    let verdicts = |r: Value| -> Vec<(Value, Value, Value)> {
        r["models"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["verdicts"].as_array().unwrap().clone())
            .map(|v| (v["variant"].clone(), v["verdict"].clone(), v["sequential"]["n_treatment"].clone()))
            .collect()
    };
    assert_eq!(verdicts(report(&lab, 3)), verdicts(report(&whole, 3)));
}
