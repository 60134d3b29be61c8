//! The whole host event-loop audit (runbooks/host-event-loop-audit.toml) through the real
//! binary, as a user runs it: about 8 minutes of real time, so it is ignored by plain
//! `cargo test` and run once by CI (`cargo test --test integration host_audit:: -- --ignored`).

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{TempLab, csv_means};

#[test]
#[ignore = "runs the full host audit (about 8 minutes); CI runs it with --ignored"]
fn the_poll_relay_costs_many_times_the_control_and_the_epoll_relay_does_not() {
    let lab = TempLab::new();
    let out = lab
        .cmd(&["run", "runbooks/host-event-loop-audit.toml"])
        .timeout(Duration::from_secs(40 * 60))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert_eq!(out.status.code(), Some(0), "every trial must end valid:\n{stderr}");

    let id = &lab.campaigns()[0];
    let csv = std::fs::read_to_string(lab.artifacts().join(id).join("results.csv")).unwrap();
    let cpu = csv_means(&csv, "cpu_pct");
    let wakeups = csv_means(&csv, "wakeups_per_s");
    let requests = csv_means(&csv, "endpoint_requests");
    let ratio = |m: &BTreeMap<String, f64>, v: &str| m[v] / m["control"];
    println!("cpu_pct means: {cpu:?}");
    println!("wakeups_per_s means: {wakeups:?}");
    println!(
        "relay-poll / control: CPU ×{:.1}, wakeups ×{:.1}; relay-epoll / control: CPU ×{:.2}, wakeups ×{:.2}",
        ratio(&cpu, "relay-poll"),
        ratio(&wakeups, "relay-poll"),
        ratio(&cpu, "relay-epoll"),
        ratio(&wakeups, "relay-epoll")
    );
    for (v, n) in &requests {
        assert!((99.0..=101.0).contains(n), "{v}: {n} requests per 20 s trial on average, 100 expected");
    }
    assert!(ratio(&cpu, "relay-poll") >= 5.0, "poll relay CPU: {cpu:?}");
    assert!(ratio(&wakeups, "relay-poll") >= 20.0, "poll relay wakeups: {wakeups:?}");
    for v in ["relay-epoll", "relay-epoll-60s"] {
        assert!(ratio(&cpu, v) <= 3.0, "{v} CPU within a small factor of control: {cpu:?}");
        assert!(ratio(&wakeups, v) <= 3.0, "{v} wakeups within a small factor of control: {wakeups:?}");
    }

    // The report decides: the poll relay is `worse` than control on CPU, a gating metric.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(lab.artifacts().join(id).join("report.json")).unwrap()).unwrap();
    let verdicts = report["models"][0]["verdicts"].as_array().unwrap();
    let poll = verdicts.iter().find(|v| v["variant"] == "relay-poll").unwrap();
    println!("relay-poll verdict: {}", poll["summary"]);
    assert_eq!(poll["verdict"], "worse", "{poll}");
    assert!(poll["worse"].as_array().unwrap().iter().any(|m| m == "cpu_pct"), "{poll}");

    // The lab itself slept through the soaks.
    let fp: Vec<String> = lab.sql("SELECT footprint_json FROM campaigns");
    let fp: serde_json::Value = serde_json::from_str(&fp[0]).unwrap();
    println!("lab footprint: {fp}");
    assert!(fp["lab"]["wakeups_per_s"].as_f64().unwrap() < 1.0, "{fp}");
    assert!(fp["lab"]["cpu_pct_of_core"].as_f64().unwrap() < 0.5, "{fp}");
}
