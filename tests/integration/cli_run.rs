//! `lab run` end to end on the default lab, through the real binary.

use crate::common;

use common::{TempLab, csv_means, root};

fn results_csv(lab: &TempLab, id: &str) -> String {
    std::fs::read_to_string(lab.artifacts().join(id).join("results.csv")).unwrap()
}

#[test]
fn quickstart_ends_with_the_table_and_the_report_paths() {
    let lab = TempLab::new();
    let out = lab.cmd(&["run", "runbooks/quickstart.toml"]).assert().success().get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    let ids = lab.campaigns();
    assert_eq!(ids.len(), 1);
    for f in ["report.md", "results.csv", "report.json"] {
        assert!(out.contains(f), "output names {f}:\n{out}");
        assert!(lab.artifacts().join(&ids[0]).join(f).exists());
    }
    assert!(out.contains("idle") && out.contains("busy") && out.contains("cpu_pct"), "{out}");
    // 2 builds × 4 repeats × 2 models.
    let valid: Vec<i64> = lab.sql("SELECT COUNT(*) FROM attempts WHERE status = 'valid'");
    assert_eq!(valid, [16]);
    // The run left its summaries in the store: every value of a valid attempt, once.
    let measured: Vec<i64> = lab.sql(
        "SELECT COUNT(*) FROM measurements m JOIN attempts a
         ON a.campaign = m.campaign AND a.trial_idx = m.trial_idx AND a.attempt = m.attempt WHERE a.status = 'valid'",
    );
    assert_eq!(lab.sql::<i64>("SELECT SUM(n) FROM campaign_summaries"), measured);
    let keys: Vec<i64> = lab.sql(
        "SELECT COUNT(*) FROM (SELECT DISTINCT t.device_model, t.variant, m.metric FROM measurements m
         JOIN trials t ON t.campaign = m.campaign AND t.idx = m.trial_idx)",
    );
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM campaign_summaries"), keys);
    assert_eq!(
        lab.sql::<i64>("SELECT COUNT(*) FROM campaign_summaries WHERE build_sha256 IS NULL OR length(vals) != 8 * n"),
        [0],
        "each row has its sim build's hash and its values"
    );
}

#[test]
fn envoy_audit_lands_on_the_seed_figures_with_every_trial_valid() {
    let lab = TempLab::new();
    lab.cmd(&["run", "runbooks/envoy-battery-audit.toml"]).assert().success();
    let id = &lab.campaigns()[0];
    let invalid: Vec<i64> = lab.sql("SELECT COUNT(*) FROM attempts WHERE status != 'valid'");
    assert_eq!(invalid, [0], "every trial valid");
    let csv = results_csv(&lab, id);
    let within = |got: f64, want: f64| (got - want).abs() <= 0.15 * want;
    let cpu = csv_means(&csv, "cpu_pct");
    let energy = csv_means(&csv, "energy_level");
    let mem = csv_means(&csv, "memory_mb");
    let drop = csv_means(&csv, "battery_drop_pct");
    for (variant, c, e, m) in [("control", 12.0, 1.0, 6.0), ("envoy-poll", 185.0, 12.0, 12.0)] {
        assert!(within(cpu[variant], c), "{variant} cpu {}", cpu[variant]);
        assert!(within(energy[variant], e), "{variant} energy {}", energy[variant]);
        assert!(within(mem[variant], m), "{variant} memory {}", mem[variant]);
    }
    assert!(within(cpu["envoy-kqueue"], 4.0), "kqueue cpu {}", cpu["envoy-kqueue"]);
    assert!(
        within(drop["envoy-kqueue"], drop["control"]),
        "kqueue drop {} vs control {}",
        drop["envoy-kqueue"],
        drop["control"]
    );
}

#[test]
fn same_runbook_and_seed_give_byte_identical_results() {
    let (a, b) = (TempLab::new(), TempLab::new());
    for lab in [&a, &b] {
        lab.cmd(&["run", "runbooks/envoy-battery-audit.toml"]).assert().success();
    }
    let (ca, cb) = (results_csv(&a, &a.campaigns()[0]), results_csv(&b, &b.campaigns()[0]));
    assert!(ca.lines().count() > 100);
    assert_eq!(ca, cb);
}

#[test]
fn run_without_a_runbook_points_at_the_runbooks() {
    let lab = TempLab::new();
    let out = lab.cmd(&["run"]).assert().code(2).get_output().stderr.clone();
    let err = String::from_utf8(out).unwrap();
    assert!(err.contains("runbooks/quickstart.toml") && err.contains("runbooks/envoy-battery-audit.toml"), "{err}");
    assert!(!lab.store().exists());
}

#[test]
fn report_and_status_read_the_finished_campaign() {
    let lab = TempLab::new();
    lab.cmd(&["run", "runbooks/quickstart.toml"]).assert().success();
    let id = lab.campaigns()[0].clone();
    let summaries = || lab.sql::<i64>(&format!("SELECT COUNT(*) FROM campaign_summaries WHERE campaign = '{id}'"));
    let after_run = summaries();
    rusqlite::Connection::open(lab.store()).unwrap().execute("DELETE FROM campaign_summaries", []).unwrap();
    let table = String::from_utf8(lab.cmd(&["report"]).assert().success().get_output().stdout.clone()).unwrap();
    assert!(table.contains("cpu_pct"), "{table}");
    assert!(after_run[0] > 0);
    assert_eq!(summaries(), after_run, "`lab report` writes the summaries again");
    let csv =
        String::from_utf8(lab.cmd(&["report", &id, "--format", "csv"]).assert().success().get_output().stdout.clone())
            .unwrap();
    assert_eq!(csv, std::fs::read_to_string(lab.artifacts().join(&id).join("results.csv")).unwrap());
    // Files that match the store are left as they are; a change in the store rewrites them.
    let md = lab.artifacts().join(&id).join("report.md");
    let written = || std::fs::metadata(&md).unwrap().modified().unwrap();
    let before = written();
    lab.cmd(&["report", &id, "--format", "json"]).assert().success();
    assert_eq!(written(), before, "nothing changed: report.md is not rewritten");
    lab.sql::<i64>(&format!("UPDATE campaigns SET note = 'checked by hand' WHERE id = '{id}' RETURNING 1"));
    lab.cmd(&["report", &id, "--format", "json"]).assert().success();
    assert!(std::fs::read_to_string(&md).unwrap().contains("checked by hand"), "the store changed: rewritten");
    let status = lab.cmd(&["status", "--json"]).assert().success().get_output().stdout.clone();
    let v: serde_json::Value = serde_json::from_slice(&status).unwrap();
    assert_eq!(v["campaigns"][0]["campaign"], id.as_str());
    assert_eq!(v["campaigns"][0]["status"], "done");
    assert_eq!(v["campaigns"][0]["progress"], "16/16");
    // Four simulated phones and this machine.
    assert_eq!(v["devices"].as_array().unwrap().len(), 5);
    let _ = root();
}
