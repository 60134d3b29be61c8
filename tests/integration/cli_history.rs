//! `lab history` through the binary: a few quickstart campaigns (different seeds) on the
//! default simulated lab, shown as a table, JSON and an HTML page; an unknown runbook.

use crate::common;

use std::path::PathBuf;

use common::{TempLab, root};

/// A lab with `n` quickstart campaigns, seeds 1..=n; returns it and the runbook file.
fn lab_with_campaigns(n: u64) -> (TempLab, PathBuf) {
    lab_with_busy_cpu(&vec![40; n as usize])
}

/// One quickstart campaign per entry, with the busy build's cpu_pct set to it.
pub(crate) fn lab_with_busy_cpu(cpu: &[u32]) -> (TempLab, PathBuf) {
    lab_with_busy_cpu_and(cpu, "")
}

/// … on the default lab with `extra` appended to its lab.toml.
fn lab_with_busy_cpu_and(cpu: &[u32], extra: &str) -> (TempLab, PathBuf) {
    let lab = TempLab::from_text(&(std::fs::read_to_string(root().join("lab.toml")).unwrap() + extra));
    let text = std::fs::read_to_string(root().join("runbooks/quickstart.toml")).unwrap();
    let file = lab.dir.path().join("quickstart.toml");
    for (seed, cpu) in cpu.iter().enumerate() {
        let text = text
            .replace("seed = 7", &format!("seed = {}", seed + 1))
            .replace("cpu_pct = 40", &format!("cpu_pct = {cpu}"));
        std::fs::write(&file, text).unwrap();
        lab.cmd(&["run", file.to_str().unwrap()]).assert().success();
    }
    (lab, file)
}

fn stdout(lab: &TempLab, args: &[&str]) -> String {
    let out = lab.cmd(args).assert().success().get_output().clone();
    String::from_utf8(out.stdout).unwrap()
}

/// Campaign ids and dates come from the wall clock: named by their order instead, padded
/// to the same width so the tables keep their shape.
fn redacted(text: &str, campaigns: &[String]) -> String {
    let mut by_length: Vec<(usize, &String)> = campaigns.iter().rev().enumerate().collect();
    // `X-2` contains `X`: the longer ids go first.
    by_length.sort_by_key(|(_, id)| std::cmp::Reverse(id.len()));
    let mut out = text.to_string();
    for (i, id) in by_length {
        out = out.replace(id.as_str(), &format!("{:<w$}", format!("[campaign {}]", i + 1), w = id.len()));
    }
    without_dates(&out)
}

/// `YYYY-MM-DD HH:MM` → `[date          ]`, as wide.
fn without_dates(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let is_date = |s: &[u8]| {
        s.len() >= 16
            && s[..16].iter().enumerate().all(|(k, c)| match k {
                4 | 7 => *c == b'-',
                10 => *c == b' ',
                13 => *c == b':',
                _ => c.is_ascii_digit(),
            })
    };
    while i < b.len() {
        if is_date(&b[i..]) {
            out.push_str("[date          ]");
            i += 16;
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

#[test]
fn history_of_quickstart_as_table_json_and_html() {
    let (lab, file) = lab_with_campaigns(3);
    let campaigns = lab.campaigns();
    assert_eq!(campaigns.len(), 3);

    let table = stdout(&lab, &["history", "quickstart", "--metric", "cpu_pct"]);
    insta::assert_snapshot!("quickstart_cpu_table", redacted(&table, &campaigns));
    // A runbook file names the runbook by its `name`.
    let by_file = stdout(&lab, &["history", file.to_str().unwrap(), "--metric", "cpu_pct"]);
    assert_eq!(by_file, table);

    let json = stdout(&lab, &["history", "quickstart", "--format", "json", "--variant", "busy"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["runbook"], "quickstart");
    assert_eq!(v["options"]["window_len"], 50, "no schedule runs quickstart: Otava's defaults");
    let series = v["series"].as_array().unwrap();
    assert!(!series.is_empty() && series.iter().all(|s| s["variant"] == "busy"), "{json}");
    let oldest_first: Vec<String> = campaigns.iter().rev().cloned().collect();
    for s in series {
        let ids: Vec<&str> = s["points"].as_array().unwrap().iter().map(|p| p["campaign"].as_str().unwrap()).collect();
        assert_eq!(ids, oldest_first, "one point per campaign, oldest first");
    }
    let cpu = series.iter().find(|s| s["metric"] == "cpu_pct").unwrap();
    assert_eq!(cpu["gating"], true);
    for p in cpu["points"].as_array().unwrap() {
        let (m, lo, hi) = (p["mean"].as_f64().unwrap(), p["ci_low"].as_f64().unwrap(), p["ci_high"].as_f64().unwrap());
        assert!(lo < m && m < hi && (35.0..45.0).contains(&m), "busy cpu near 40 %: {p}");
        assert_eq!(p["status"], "done");
    }

    let html = stdout(&lab, &["history", "quickstart", "--format", "html", "--metric", "cpu_pct"]);
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"), "{html}");
    let figures = html.matches("<svg").count();
    assert_eq!(figures, html.matches("<table>").count());
    assert!(figures >= 2, "a figure per variant × model: {figures}");
}

#[test]
fn a_new_busy_build_is_a_change_point_at_its_first_campaign() {
    let (lab, _) = lab_with_busy_cpu(&[40, 40, 40, 40, 48, 48, 48, 48]);
    let args = ["history", "quickstart", "--variant", "busy", "--model", "iPhone 6s", "--metric", "cpu_pct"];
    let json = stdout(&lab, &[&args[..], &["--format", "json"]].concat());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let s = &v["series"][0];
    assert_eq!(v["series"].as_array().unwrap().len(), 1);
    let changes = s["change_points"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{json}");
    let c = &changes[0];
    assert_eq!(c["index"], 4);
    assert_eq!(c["campaign"], s["points"][4]["campaign"]);
    assert!(c["state"].is_null(), "no schedule reviewed it");
    let rel = c["mean_after"].as_f64().unwrap() / c["mean_before"].as_f64().unwrap() - 1.0;
    assert!((0.15..0.25).contains(&rel), "+20 %: {rel}");
    assert_ne!(s["points"][3]["build_sha256"], s["points"][4]["build_sha256"], "a new build");
    let table = stdout(&lab, &args);
    let line = table.lines().find(|l| l.starts_with("│ 4 ")).unwrap();
    assert!(line.contains("▲ +"), "{table}");
}

#[test]
fn the_change_point_options_come_from_the_schedule_running_the_runbook() {
    // A magnitude floor of 50 % hides the +20 % step.
    let weekly = "\n[[schedule]]\nname = \"weekly\"\ncron = \"0 3 * * 1\"\ntimezone = \"UTC\"\nrunbook = \"quickstart.toml\"\n\
[schedule.changes]\nwindow_len = 12\nmin_magnitude = 0.5\n";
    let (lab, _) = lab_with_busy_cpu_and(&[40, 40, 40, 40, 48, 48, 48, 48], weekly);
    let json = stdout(&lab, &["history", "quickstart", "--format", "json", "--variant", "busy", "--metric", "cpu_pct"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!((v["options"]["window_len"].as_u64(), v["options"]["min_magnitude"].as_f64()), (Some(12), Some(0.5)));
    assert!(v["series"].as_array().unwrap().iter().all(|s| s["change_points"] == serde_json::json!([])), "{json}");
}

#[test]
fn stale_summaries_are_recomputed_first() {
    let (lab, _) = lab_with_campaigns(2);
    let conn = rusqlite::Connection::open(lab.store()).unwrap();
    conn.execute("DELETE FROM campaign_summaries", []).unwrap();
    let json = stdout(&lab, &["history", "quickstart", "--format", "json", "--metric", "cpu_pct"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["series"].as_array().unwrap().iter().all(|s| s["points"].as_array().unwrap().len() == 2), "{json}");
    let rows: Vec<i64> = lab.sql("SELECT COUNT(*) FROM campaign_summaries");
    assert!(rows[0] > 0, "written back");
}

#[test]
fn an_unknown_runbook_exits_2_naming_the_known_ones() {
    let (lab, _) = lab_with_campaigns(1);
    let out = lab.cmd(&["history", "nope"]).assert().code(2).get_output().clone();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("`nope`") && err.contains("known: quickstart") && err.contains("fix:"), "{err}");
}
