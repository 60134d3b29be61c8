//! Verdicts end to end through the real binary: the Envoy audit's known answers,
//! `lab compare`'s exit code, the HTML report, adaptive repeats.

use crate::common;

use common::TempLab;
use serde_json::Value;

fn report_json(lab: &TempLab, id: &str) -> Value {
    let text = std::fs::read_to_string(lab.artifacts().join(id).join("report.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The comparison of `variant`'s `metric` against the baseline on the first model.
fn comparison<'a>(r: &'a Value, variant: &str, metric: &str) -> &'a Value {
    let rows = r["models"][0]["rows"].as_array().unwrap();
    let row = rows.iter().find(|x| x["variant"] == variant && x["metric"] == metric).expect("row");
    &row["comparisons"][0]
}

#[test]
fn envoy_audit_known_answers() {
    let lab = TempLab::new();
    let out = lab.cmd(&["run", "runbooks/envoy-battery-audit.toml"]).assert().success().get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    let id = lab.campaigns()[0].clone();
    let r = report_json(&lab, &id);
    assert_eq!(
        r["statistics"]["gating"],
        serde_json::json!(["energy_level", "charge_used_mah", "cpu_pct", "memory_mb"])
    );
    for metric in ["cpu_pct", "energy_level"] {
        let c = comparison(&r, "envoy-poll", metric);
        assert_eq!(c["against"], "control");
        assert_eq!(c["verdict"], "worse", "{metric}: {c}");
        let p = c["p_adjusted"].as_f64().unwrap();
        assert!(p < 0.01, "{metric}: adjusted p {p}");
        assert_eq!(c["family_size"], 4);
    }
    let energy = comparison(&r, "envoy-kqueue", "energy_level");
    assert_eq!(energy["verdict"], "same", "{energy}");
    // Zero spread in both arms (energy level 1 in every trial): finite figures, no NaN.
    assert_eq!(energy["welch"]["p"], 1.0);
    assert_eq!(energy["mann_whitney"]["p"], 1.0);
    assert_eq!(energy["change"]["delta"], 0.0);
    assert!(energy["hedges_g"].is_null());
    let verdicts = r["models"][0]["verdicts"].as_array().unwrap();
    let poll = verdicts.iter().find(|v| v["variant"] == "envoy-poll").unwrap();
    assert_eq!(poll["verdict"], "worse");
    assert!(out.contains("envoy-poll vs control: worse — "), "{out}");
    for f in ["report.md", "report.html", "results.csv", "summary.csv", "report.json"] {
        assert!(lab.artifacts().join(&id).join(f).exists(), "{f}");
        assert!(out.contains(f), "output names {f}");
    }
}

#[test]
fn envoy_report_table_snapshot() {
    let lab = TempLab::new();
    lab.cmd(&["run", "runbooks/envoy-battery-audit.toml"]).assert().success();
    let id = lab.campaigns()[0].clone();
    let out = lab.cmd(&["report", &id]).assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap().replace(&id, "<campaign>");
    insta::assert_snapshot!(text);
    let html = lab.cmd(&["report", &id, "--format", "html"]).assert().success().get_output().stdout.clone();
    let html = String::from_utf8(html).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"));
    assert!(html.contains("<h3>Battery level</h3>"), "battery curves");
    assert_eq!(html, std::fs::read_to_string(lab.artifacts().join(&id).join("report.html")).unwrap());
}

/// Every file under `dir` whose name is `name`.
fn files_named(dir: &std::path::Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_named(&p, name));
        } else if p.file_name().is_some_and(|n| n == name) {
            out.push(p);
        }
    }
    out
}

/// The battery curves are drawn from the series the store kept at collect time: with
/// every raw dump gone the page is the same; a campaign whose attempts have no series
/// (recorded before the store kept them) just has no curves.
#[test]
fn battery_curves_come_from_the_store_not_the_artifacts() {
    let lab = TempLab::new();
    lab.cmd(&["run", "runbooks/envoy-battery-audit.toml"]).assert().success();
    let id = lab.campaigns()[0].clone();
    let html = |lab: &TempLab| {
        let out = lab.cmd(&["report", &id, "--format", "html"]).assert().success().get_output().stdout.clone();
        String::from_utf8(out).unwrap()
    };
    let before = html(&lab);
    assert!(before.contains("<h3>Battery level</h3>"), "battery curves");
    let attempts: Vec<i64> = lab.sql("SELECT COUNT(*) FROM attempts");
    let series: Vec<i64> = lab.sql("SELECT COUNT(*) FROM series WHERE name = 'battery_pct' AND length(points) > 0");
    assert_eq!(series, attempts, "one battery series per attempt");

    let dumps = files_named(&lab.artifacts().join(&id), "sim-energy.log");
    assert_eq!(dumps.len() as i64, attempts[0]);
    for d in &dumps {
        std::fs::remove_file(d).unwrap();
    }
    assert_eq!(html(&lab), before, "the page does not need the raw dumps");

    let conn = rusqlite::Connection::open(lab.store()).unwrap();
    conn.execute("DELETE FROM series", []).unwrap();
    drop(conn);
    let without = html(&lab);
    assert!(!without.contains("<h3>Battery level</h3>") && without.contains("<svg"), "no curves, other plots stay");
}

#[test]
fn compare_exits_5_on_a_regression_and_0_without() {
    let lab = TempLab::new();
    lab.cmd(&["run", "runbooks/envoy-battery-audit.toml"]).assert().success();
    // The same runbook later, with envoy-poll 30 % more CPU-hungry.
    let text = std::fs::read_to_string(common::root().join("runbooks/envoy-battery-audit.toml")).unwrap();
    let hotter = text.replace("cpu_pct = 185", "cpu_pct = 240");
    assert_ne!(hotter, text);
    let path = lab.dir.path().join("envoy-battery-audit.toml");
    std::fs::write(&path, hotter).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100)); // campaign ids carry the second
    lab.cmd(&["run", path.to_str().unwrap()]).assert().success();
    let ids = lab.campaigns();
    let (before, after) = (&ids[1], &ids[0]);

    let out = lab.cmd(&["compare", before, after]).assert().code(5).get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("envoy-poll: worse — ") && out.contains("cpu_pct +29"), "{out}");
    assert!(out.contains("control: same — every gating metric shown the same"), "{out}");
    let json = lab.cmd(&["compare", before, after, "--format", "json"]).assert().code(5).get_output().stdout.clone();
    let v: Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["runbook_changed"], true);
    assert_eq!(v["before"]["id"], before.as_str());

    // B against itself-like data: A re-run unchanged → no regression, exit 0.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    lab.cmd(&["run", "runbooks/envoy-battery-audit.toml"]).assert().success();
    let newest = lab.campaigns()[0].clone();
    let md = lab.cmd(&["compare", before, &newest, "--format", "md"]).assert().code(0).get_output().stdout.clone();
    assert!(String::from_utf8(md).unwrap().starts_with("# Comparison: envoy-battery-audit"));
}

#[test]
fn compare_refuses_different_runbooks_and_unknown_campaigns() {
    let lab = TempLab::new();
    lab.cmd(&["run", "runbooks/quickstart.toml"]).assert().success();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    lab.cmd(&["run", "runbooks/envoy-battery-audit.toml"]).assert().success();
    let ids = lab.campaigns();
    let err = lab.cmd(&["compare", &ids[1], &ids[0]]).assert().code(2).get_output().stderr.clone();
    let err = String::from_utf8(err).unwrap();
    assert!(
        err.contains("ran runbook `quickstart`") && err.contains("fix: compare two campaigns of one runbook"),
        "{err}"
    );
    let err = lab.cmd(&["compare", &ids[0], "nope"]).assert().code(2).get_output().stderr.clone();
    assert!(String::from_utf8(err).unwrap().contains("no campaign `nope`"));
}

#[test]
fn adaptive_repeats_add_balanced_blocks_up_to_max() {
    let lab = TempLab::new();
    let text = std::fs::read_to_string(common::root().join("runbooks/quickstart.toml")).unwrap();
    let adaptive = text.replace("repeats = 4", "repeats = { min = 4, max = 10, target_ci = \"1%\" }");
    assert_ne!(adaptive, text);
    let path = lab.dir.path().join("adaptive.toml");
    std::fs::write(&path, adaptive).unwrap();
    let plan = lab.cmd(&["plan", path.to_str().unwrap()]).assert().success().get_output().stdout.clone();
    let plan = String::from_utf8(plan).unwrap();
    assert!(plan.contains("adaptive repeats: this is the first round (4 per variant per model)"), "{plan}");
    assert!(plan.contains("within ±1% of its mean, up to 10 per variant per model"), "{plan}");
    let out = lab.cmd(&["run", path.to_str().unwrap()]).assert().success().get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("adaptive repeats, round 2: "), "{out}");
    // A 1 % target is out of reach here: every variant × model stops at max = 10.
    let per_cell: Vec<i64> = lab.sql("SELECT COUNT(*) FROM trials GROUP BY device_model, variant");
    assert_eq!(per_cell, [10, 10, 10, 10]);
    // Blocks stay balanced per device: each block runs each needing variant once.
    let unbalanced: Vec<i64> = lab.sql(
        "SELECT COUNT(*) FROM (SELECT device, block, variant, COUNT(*) c FROM trials GROUP BY 1, 2, 3) WHERE c > 1",
    );
    assert_eq!(unbalanced, [0]);
    // The stored plan knows the added trials (resume reads it).
    let plan: Vec<String> = lab.sql("SELECT plan_json FROM campaigns");
    let plan: Value = serde_json::from_str(&plan[0]).unwrap();
    assert_eq!(plan["trials"].as_array().unwrap().len(), 40);
    assert_eq!(plan["adaptive"]["max"], 10);
    let pending: Vec<i64> = lab.sql("SELECT COUNT(*) FROM trials t WHERE NOT EXISTS (SELECT 1 FROM attempts a WHERE a.campaign = t.campaign AND a.trial_idx = t.idx)");
    assert_eq!(pending, [0]);

    // A reachable target stops before max.
    let lab = TempLab::new();
    let easy = text.replace("repeats = 4", "repeats = { min = 4, max = 30, target_ci = \"40%\" }");
    let path = lab.dir.path().join("easy.toml");
    std::fs::write(&path, easy).unwrap();
    lab.cmd(&["run", path.to_str().unwrap()]).assert().success();
    let trials: Vec<i64> = lab.sql("SELECT COUNT(*) FROM trials");
    assert!(trials[0] < 4 * 30, "stopped on precision, before max: {} trials", trials[0]);
}

#[test]
fn config_variants_are_compared_with_the_baseline_build_and_the_default_config() {
    let lab = TempLab::new();
    let text = std::fs::read_to_string(common::root().join("runbooks/quickstart.toml")).unwrap();
    let with_configs = format!("{text}\n[configs.default]\n\n[configs.trace]\n[configs.trace.sim]\ncpu_scale = 1.5\n");
    let path = lab.dir.path().join("configs.toml");
    std::fs::write(&path, with_configs).unwrap();
    lab.cmd(&["run", path.to_str().unwrap()]).assert().success();
    let r = report_json(&lab, &lab.campaigns()[0]);
    let rows = r["models"][0]["rows"].as_array().unwrap();
    let against = |variant: &str| -> Vec<(String, String)> {
        let row = rows.iter().find(|x| x["variant"] == variant && x["metric"] == "cpu_pct").unwrap();
        row["comparisons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["against"].as_str().unwrap().to_string(), c["kind"].as_str().unwrap().to_string()))
            .collect()
    };
    let pair = |a: &str, k: &str| (a.to_string(), k.to_string());
    assert!(against("idle+default").is_empty(), "the baseline has no reference");
    assert_eq!(against("idle+trace"), [pair("idle+default", "default_config")]);
    assert_eq!(against("busy+default"), [pair("idle+default", "baseline_build")]);
    assert_eq!(against("busy+trace"), [pair("idle+trace", "baseline_build"), pair("busy+default", "default_config")]);
    // The trace config's +50 % CPU shows against the default config.
    let trace = rows.iter().find(|x| x["variant"] == "idle+trace" && x["metric"] == "cpu_pct").unwrap();
    assert_eq!(trace["comparisons"][0]["verdict"], "worse", "{}", trace["comparisons"][0]);
    let verdicts = r["models"][0]["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), 4, "idle+trace, busy+default and busy+trace (twice)");
}

#[test]
fn an_adaptive_campaign_killed_mid_round_resumes_to_max() {
    let lab = TempLab::new();
    let text = std::fs::read_to_string(common::root().join("tests/fixtures/long.toml")).unwrap();
    // An unreachable target: rounds keep adding blocks until max.
    let adaptive = text.replace("repeats = 1000", "repeats = { min = 4, max = 80, target_ci = \"0.01%\" }");
    assert_ne!(adaptive, text);
    let path = lab.dir.path().join("adaptive-long.toml");
    std::fs::write(&path, adaptive).unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("lab"))
        .current_dir(common::root())
        .args(["--lab", lab.lab.to_str().unwrap(), "run", path.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        // Well past the first round's 16 trials: trials were added and are running.
        if lab.store().exists()
            && let Ok(n) = lab.try_sql::<i64>("SELECT COUNT(*) FROM attempts")
            && n.first().copied().unwrap_or(0) >= 100
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "campaign never got going");
        assert!(child.try_wait().unwrap().is_none(), "lab run ended before it could be killed");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let planned: i64 = lab.sql::<i64>("SELECT COUNT(*) FROM trials")[0];
    assert!((100..=320).contains(&planned), "killed mid-way: {planned} trials planned");
    let plan: Vec<String> = lab.sql("SELECT plan_json FROM campaigns");
    let plan: Value = serde_json::from_str(&plan[0]).unwrap();
    assert_eq!(plan["trials"].as_array().unwrap().len() as i64, planned, "trials and stored plan agree");

    let id = lab.campaigns()[0].clone();
    lab.cmd(&["run", "--resume", &id]).assert().success();
    let per_cell: Vec<i64> = lab.sql("SELECT COUNT(*) FROM trials GROUP BY device_model, variant");
    assert_eq!(per_cell, [80, 80, 80, 80]);
    let valid_per_trial: Vec<i64> = lab.sql(
        "SELECT COUNT(a.attempt) FROM trials t LEFT JOIN attempts a ON a.campaign = t.campaign AND a.trial_idx = t.idx AND a.status = 'valid' GROUP BY t.idx",
    );
    assert!(valid_per_trial.iter().all(|&n| n == 1), "exactly one valid attempt per planned trial");
    let done: Vec<String> = lab.sql("SELECT status FROM campaigns");
    assert_eq!(done, ["done"]);
}
