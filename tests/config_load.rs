//! The repository's own lab and runbooks load cleanly, with the values they say.

use std::path::Path;
use std::time::Duration;

use lab::config::{
    LabEndpoint, Order, Platform, Selector, SimParams, TetherSpec, load_lab, load_runbook, parse_duration, parse_lab,
};

fn repo_lab() -> lab::config::Lab {
    load_lab(Path::new("lab.toml")).unwrap_or_else(|e| panic!("lab.toml:\n{e}"))
}

#[test]
fn repository_lab_loads() {
    let lab = repo_lab();
    assert_eq!(lab.name, "default");
    assert!(lab.artifacts_dir.is_absolute());
    assert!(lab.artifacts_dir.ends_with("artifacts"));
    assert!(lab.store_path.ends_with("artifacts/lab.db"));
    assert_eq!(lab.hosts.len(), 1);
    assert_eq!(lab.hosts[0].name, "local");
    let names: Vec<&str> = lab.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["sim-iphone-1", "sim-iphone-2", "sim-pixel-1", "sim-pixel-2", "this-host"]);
    assert!(lab.text.starts_with("# The default lab"));
    let host = lab.device("this-host").unwrap();
    assert_eq!((host.platform(), host.tether.clone(), host.sim().is_none()), (Platform::Host, TetherSpec::None, true));
    assert_eq!(host.tags, ["host"]);

    let iphone = lab.device("sim-iphone-1").unwrap();
    assert_eq!(iphone.platform(), Platform::Sim);
    assert_eq!(iphone.model, "iPhone 6s");
    assert_eq!(iphone.os, "iOS 12.2");
    assert_eq!(iphone.tags, ["ios", "phone"]);
    assert_eq!(iphone.tether, TetherSpec::Software);
    let sim = iphone.sim().unwrap();
    // Only `emulates` and `seed` are given: everything else is the iOS default.
    assert_eq!(sim, &SimParams { seed: 101, ..SimParams::defaults(Platform::Ios) });

    let pixel = lab.device("sim-pixel-2").unwrap().sim().unwrap();
    assert_eq!(pixel.emulates, Platform::Android);
    assert_eq!(pixel.seed, 202);
    assert_eq!(pixel.battery_mah, 4080.0);
    assert_eq!(pixel.voltage_v, 3.87);
    // The default lab has no phones, so it needs no endpoint address.
    assert_eq!(lab.endpoint, LabEndpoint::default());
}

#[test]
fn quickstart_loads() {
    let lab = repo_lab();
    let path = Path::new("runbooks/quickstart.toml");
    let rb = load_runbook(path, &lab).unwrap_or_else(|e| panic!("{}:\n{e}", path.display()));
    assert_eq!(rb.name, "quickstart");
    assert_eq!(rb.duration, Duration::from_secs(600));
    assert_eq!(rb.repeats, 4);
    assert_eq!(rb.seed, 7);
    assert_eq!(rb.order, Order::Balanced);
    assert_eq!(rb.cooldown, Duration::from_secs(60));
    assert_eq!(rb.retries, 2);
    assert_eq!(rb.devices, [Selector::Tag("phone".into())]);
    let builds: Vec<(&str, bool)> = rb.builds.iter().map(|b| (b.name.as_str(), b.baseline)).collect();
    assert_eq!(builds, [("idle", true), ("busy", false)]);
    assert_eq!(rb.baseline().name, "idle");
    let busy = rb.builds[1].sim.as_ref().unwrap();
    assert_eq!((busy.cpu_pct, busy.wakeups_per_s, busy.memory_mb), (40.0, 200.0, 35.0));
    assert_eq!((busy.cache_hit_ratio, busy.crash_probability), (0.0, 0.0));
    assert_eq!(rb.configs.len(), 1);
    assert_eq!(rb.configs[0].name, "default");
    assert_eq!(rb.workload.request_interval, Some(Duration::from_secs(1)));
    assert_eq!(rb.workload.request_tolerance, 0.02);
    assert_eq!(rb.preconditions.brightness, Some((40.0, 60.0)));
    assert_eq!(rb.preconditions.battery_min, Some(50.0));
    assert_eq!(rb.preconditions.temperature_max, Some(40.0));
    assert!(rb.preconditions.untethered && rb.preconditions.app_foreground);
    assert!(rb.metrics.is_empty());
    assert_eq!(rb.statistics, Default::default());
    assert_eq!(rb.timeouts, Default::default());
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(rb.text.as_bytes(), bytes.as_slice());
    assert_eq!(rb.sha256, lab::seed::sha256_hex(&bytes));
}

#[test]
fn envoy_audit_loads() {
    let lab = repo_lab();
    let rb = load_runbook(Path::new("runbooks/envoy-battery-audit.toml"), &lab).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rb.name, "envoy-battery-audit");
    assert_eq!(rb.duration, Duration::from_secs(3600));
    assert_eq!((rb.repeats, rb.seed), (6, 2019));
    assert_eq!(rb.cooldown, Duration::from_secs(300));
    assert_eq!(rb.devices, [Selector::Model("iPhone 6s".into())]);
    let names: Vec<&str> = rb.builds.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["control", "envoy-poll", "envoy-kqueue"]);
    assert_eq!(rb.baseline().name, "control");
    assert_eq!(rb.builds[1].sim.as_ref().unwrap().cpu_pct, 185.0);
    assert!(rb.builds.iter().all(|b| b.runs_on(Platform::Sim) && !b.runs_on(Platform::Ios)));
    assert_eq!(rb.workload.request_interval, Some(Duration::from_millis(200)));
    assert_eq!(rb.workload.expected_requests(rb.duration), Some(18_000));
    assert_eq!(rb.workload.request_tolerance, 0.02);
    assert_eq!(rb.preconditions.battery_min, Some(80.0));
    assert_eq!(rb.preconditions.bluetooth, Some(true));
    assert_eq!(
        rb.metrics,
        ["battery_drop_pct", "charge_used_mah", "avg_power_mw", "energy_level", "cpu_pct", "memory_mb", "requests"]
    );
    assert_eq!(rb.statistics.alpha, 0.05);
    assert_eq!(rb.statistics.practical_threshold, 0.05);
    assert_eq!(rb.statistics.confidence, 0.95);
}

#[test]
fn host_audit_loads() {
    let lab = repo_lab();
    let rb = load_runbook(Path::new("runbooks/host-event-loop-audit.toml"), &lab)
        .unwrap_or_else(|e| panic!("host-event-loop-audit.toml:\n{e}"));
    assert_eq!((rb.duration, rb.repeats), (Duration::from_secs(20), 5));
    assert_eq!(rb.devices, [Selector::Tag("host".into())]);
    let names: Vec<&str> = rb.builds.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["control", "relay-poll", "relay-epoll", "relay-epoll-60s"]);
    assert!(rb.builds.iter().all(|b| b.runs_on(Platform::Host) && !b.runs_on(Platform::Sim)));
    let repo = std::env::current_dir().unwrap();
    for b in &rb.builds {
        let host = b.host.as_ref().unwrap();
        let cwd = host.cwd.as_ref().unwrap().canonicalize().unwrap();
        assert_eq!(cwd, repo.canonicalize().unwrap(), "{}: runs from the repository root", b.name);
        let step = host.build.as_ref().unwrap();
        assert!(step.join(" ").contains("--manifest-path examples/host-apps/Cargo.toml"), "{step:?}");
    }
    assert_eq!(rb.builds[1].host.as_ref().unwrap().command[1..3], ["--dispatcher", "poll"]);
    assert_eq!(rb.workload.expected_requests(rb.duration), Some(100));
    assert_eq!(rb.endpoint.cache_control.as_deref(), Some("max-age=60"));
    assert_eq!(rb.preconditions.load_max, Some(1.0));
    assert_eq!(rb.preconditions.ac_power, Some(true));
}

#[test]
fn every_runbook_in_the_repository_loads() {
    let lab = repo_lab();
    let mut n = 0;
    for entry in std::fs::read_dir("runbooks").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            load_runbook(&path, &lab).unwrap_or_else(|e| panic!("{}:\n{e}", path.display()));
            n += 1;
        }
    }
    assert!(n >= 2, "found {n} runbooks");
}

#[test]
fn embedded_lab_resolves_against_the_current_directory() {
    let text = std::fs::read_to_string("lab.toml").unwrap();
    let lab = parse_lab(&text, Path::new("<embedded>")).unwrap();
    assert_eq!(lab.source, Path::new("<embedded>"));
    assert_eq!(lab.artifacts_dir, std::env::current_dir().unwrap().join("artifacts"));
    assert_eq!(lab.text, text);
}

#[test]
fn durations_as_documented() {
    assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
    assert!(parse_duration("abc").is_err());
}
