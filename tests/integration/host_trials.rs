//! Host trials through the real binary, on this machine, with the example apps
//! (examples/pinger.rs, examples/burner.rs; `cargo test` builds them).

use crate::common;

use std::time::Duration;

use common::{TempLab, csv_means, example};

/// Runs `runbook` (TOML text) on the default lab's `this-host`; returns the exit code.
fn run(lab: &TempLab, runbook: &str) -> i32 {
    let path = lab.dir.path().join("runbook.toml");
    std::fs::write(&path, runbook).unwrap();
    let out = lab.cmd(&["run", path.to_str().unwrap()]).timeout(Duration::from_secs(120)).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some(), "lab run did not finish by itself: {stderr}");
    out.status.code().unwrap()
}

fn results_csv(lab: &TempLab) -> String {
    let id = &lab.campaigns()[0];
    std::fs::read_to_string(lab.artifacts().join(id).join("results.csv")).unwrap()
}

fn report_json(lab: &TempLab) -> serde_json::Value {
    let id = &lab.campaigns()[0];
    serde_json::from_str(&std::fs::read_to_string(lab.artifacts().join(id).join("report.json")).unwrap()).unwrap()
}

/// Reasons of every attempt of `variant`'s trials, from the store.
fn reasons(lab: &TempLab, variant: &str) -> Vec<String> {
    lab.sql::<String>(&format!(
        "SELECT a.reasons FROM attempts a JOIN trials t ON t.campaign = a.campaign AND t.idx = a.trial_idx \
         WHERE t.variant = '{variant}' ORDER BY a.trial_idx, a.attempt"
    ))
}

fn footprint(lab: &TempLab) -> serde_json::Value {
    let text: Vec<String> = lab.sql("SELECT footprint_json FROM campaigns");
    serde_json::from_str(&text[0]).unwrap()
}

#[test]
fn a_client_answering_from_its_cache_is_caught_by_the_endpoint_and_left_out_of_the_statistics() {
    let lab = TempLab::new();
    let pinger = example("pinger");
    let runbook = format!(
        r#"
name = "cache-check"
duration = "2s"
repeats = 2
retries = 0
devices = ["this-host"]
[builds.honest]
baseline = true
[builds.honest.host]
command = ["{pinger}"]
[builds.cached.host]
command = ["{pinger}", "--cache"]
[workload]
request_interval = "100ms"
[endpoint]
cache_control = "max-age=60"
"#
    );
    assert_eq!(run(&lab, &runbook), 4, "the cached trials fail every attempt");

    let cached = reasons(&lab, "cached");
    assert_eq!(cached.len(), 2);
    for r in &cached {
        let r: Vec<String> = serde_json::from_str(r).unwrap();
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].starts_with("expected 20 requests, saw "), "{r:?}");
        assert!(r[0].ends_with(" — is the client answering from a cache?"), "{r:?}");
    }
    for r in reasons(&lab, "honest") {
        assert_eq!(r, "[]", "the same client without its cache sends every request");
    }

    let csv = results_csv(&lab);
    let honest = csv_means(&csv, "endpoint_requests");
    assert!((19.0..=21.0).contains(&honest["honest"]), "{honest:?}");
    assert!(!honest.contains_key("cached"), "invalid attempts are not among the valid rows");
    // The report's statistics count valid attempts only.
    let report = report_json(&lab);
    let rows = report["models"][0]["rows"].as_array().unwrap();
    let n = |variant: &str| {
        rows.iter()
            .filter(|r| r["variant"] == variant && r["metric"] == "endpoint_requests")
            .map(|r| r["n"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!((n("honest"), n("cached")), (2, 0));
    let listed = report["invalid_attempts"].as_array().unwrap();
    assert_eq!(listed.iter().filter(|a| a["variant"] == "cached").count(), 2);

    // The endpoint did the counting on its own thread; the lab itself slept.
    let fp = footprint(&lab);
    assert_eq!(fp["soaks"], 4);
    assert!(fp["endpoint"]["wakeups"].as_u64().unwrap() >= 40, "the endpoint served the honest requests: {fp}");
    let per_soak = fp["lab"]["wakeups"].as_f64().unwrap() / 4.0;
    assert!(per_soak < 10.0, "the lab woke {per_soak} times per 2 s soak: it must not poll: {fp}");
}

#[test]
fn a_calibrated_burner_is_measured_at_its_known_share() {
    let lab = TempLab::new();
    let burner = example("burner");
    let runbook = format!(
        r#"
name = "burner-check"
duration = "3s"
repeats = 3
retries = 0
devices = ["this-host"]
[builds.half-core]
baseline = true
[builds.half-core.host]
command = ["{burner}", "--share", "0.5"]
"#
    );
    assert_eq!(run(&lab, &runbook), 0);
    let csv = results_csv(&lab);
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let values: Vec<f64> = rdr
        .records()
        .map(|r| r.unwrap())
        .filter(|r| &r[12] == "cpu_pct" && &r[11] == "valid")
        .map(|r| r[13].parse().unwrap())
        .collect();
    assert_eq!(values.len(), 3);
    for v in &values {
        // ±5 % of the known 50 %.
        assert!((47.5..=52.5).contains(v), "burner at 50 % of a core measured as {v:.2} %: {values:?}");
    }
    eprintln!("burner (50 % of one core) measured at {values:.3?} %");
}

#[test]
fn an_app_that_dies_or_cannot_start_gives_invalid_trials_with_reasons_not_a_hang() {
    let lab = TempLab::new();
    let dir = lab.dir.path().display().to_string();
    let runbook = format!(
        r#"
name = "bad-apps"
duration = "1s"
repeats = 1
retries = 1
devices = ["this-host"]
[builds.fine]
baseline = true
[builds.fine.host]
command = ["sleep", "30"]
[builds.dies.host]
command = ["sh", "-c", "sleep 0.2; echo 'lost my config' >&2; exit 3"]
[builds.missing.host]
command = ["./no-such-app"]
cwd = "{dir}"
"#
    );
    let started = std::time::Instant::now();
    assert_eq!(run(&lab, &runbook), 4);
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    assert_eq!(reasons(&lab, "fine"), ["[]"]);
    let dies = reasons(&lab, "dies");
    assert_eq!(dies.len(), 2, "retried once");
    for r in &dies {
        assert!(r.contains("app died during the soak (exit code 3; stderr: lost my config)"), "{r}");
    }
    let missing = reasons(&lab, "missing");
    assert_eq!(missing.len(), 2);
    for r in &missing {
        assert!(r.contains("`./no-such-app` not found in"), "{r}");
        assert!(r.contains("fix: build it first"), "{r}");
    }
}

#[test]
fn a_taken_endpoint_port_stops_the_campaign_with_the_key_to_change() {
    let lab = TempLab::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let runbook = format!(
        r#"
name = "port-taken"
duration = "1s"
repeats = 1
devices = ["this-host"]
[builds.app]
baseline = true
[builds.app.host]
command = ["sleep", "30"]
[workload]
request_interval = "100ms"
[endpoint]
bind = "{addr}"
"#
    );
    let path = lab.dir.path().join("runbook.toml");
    std::fs::write(&path, runbook).unwrap();
    let out = lab.cmd(&["run", path.to_str().unwrap()]).timeout(Duration::from_secs(60)).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr.contains(&format!("traffic endpoint: cannot listen on {addr}")), "{stderr}");
    assert!(stderr.contains("fix: set another `bind` under [endpoint]"), "{stderr}");
    let status: Vec<String> = lab.sql("SELECT status FROM campaigns");
    assert_eq!(status, ["interrupted"], "the campaign is left resumable, not running");
}
