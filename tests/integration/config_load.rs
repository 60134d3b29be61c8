//! The repository's own lab and runbooks load cleanly, with the values they say.

use std::path::Path;
use std::time::Duration;

use lab::config::{
    IntentExtra, LabEndpoint, Order, Platform, Selector, SimAdjust, SimParams, TetherSpec, UsbmuxdAddress, load_lab,
    load_runbook, parse_duration, parse_lab,
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
    assert!(lab.store.sqlite_path().unwrap().ends_with("artifacts/lab.db"));
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

/// lab.toml with its commented-out keys and tables (`# key = …`, `# [table]`) written in.
fn uncommented(text: &str) -> String {
    let is_toml = |rest: &str| {
        rest.starts_with('[')
            || rest
                .split_once(" = ")
                .is_some_and(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
    };
    text.lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest) if is_toml(rest) => rest,
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_commented_out_phones_of_lab_toml_are_valid() {
    let text = uncommented(&std::fs::read_to_string("lab.toml").unwrap());
    let lab = parse_lab(&text, Path::new("lab.toml")).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(lab.endpoint.url.as_deref(), Some("http://192.0.2.10:8765"));
    let pixel = lab.device("pixel-1").unwrap().android().unwrap();
    assert_eq!((pixel.serial.as_str(), pixel.adb_server.as_ref().map(|a| a.port)), ("0A1B2C3D", Some(5037)));
    let iphone = lab.device("iphone-1").unwrap().ios().unwrap();
    assert_eq!(iphone.usbmuxd, Some(UsbmuxdAddress::Socket("/var/run/usbmuxd".into())));
    // The repository's runbooks still select only what they can run.
    for rb in ["quickstart", "envoy-battery-audit", "envoy-config-variants", "aa-identical"] {
        let rb = load_runbook(Path::new(&format!("runbooks/{rb}.toml")), &lab).unwrap();
        let phones = lab.devices.iter().filter(|d| d.tags.contains(&"real".to_string()));
        assert!(phones.clone().all(|d| !rb.devices.iter().any(|s| s.matches(d))), "{} selects a real phone", rb.name);
    }
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
    // The same builds for real iPhones; the default lab selects none, so their .ipa files need not exist.
    assert!(rb.builds.iter().all(|b| b.runs_on(Platform::Sim) && b.runs_on(Platform::Ios)));
    let ipa = rb.builds[1].ios.as_ref().unwrap();
    assert!(ipa.ipa.ends_with("runbooks/builds/envoy-poll.ipa"), "{}", ipa.ipa.display());
    assert_eq!(ipa.bundle_id, "io.envoyproxy.envoymobile.audit.poll");
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
fn envoy_config_variants_load_as_runbook_entries() {
    let lab = repo_lab();
    let rb = load_runbook(Path::new("runbooks/envoy-config-variants.toml"), &lab).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (rb.name.as_str(), rb.duration, rb.repeats, rb.seed),
        ("envoy-config-variants", Duration::from_secs(3600), 6, 2019)
    );
    assert_eq!(rb.devices, [Selector::Model("iPhone 6s".into())]);
    let builds: Vec<&str> = rb.builds.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(builds, ["control", "envoy"]);
    assert!(rb.builds.iter().all(|b| b.runs_on(Platform::Sim)));
    let names: Vec<&str> = rb.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["default", "watchdog-1m", "dns-refresh-1m", "stats-flush-1m", "tuned", "tuned-trace"]);
    let config = |n: &str| rb.configs.iter().find(|c| c.name == n).unwrap();

    let default = config("default");
    assert!(default.env.is_empty() && default.android.extras.is_empty() && default.ios.env.is_empty());
    assert_eq!(default.sim, SimAdjust::default());

    // One setting, given the way each platform takes it.
    let watchdog = config("watchdog-1m");
    assert_eq!(watchdog.env.get("ENVOY_WATCHDOG_MISS_TIMEOUT").map(String::as_str), Some("60s"));
    assert_eq!(watchdog.env, watchdog.ios.env, "a host program and an iOS app get the same environment");
    assert_eq!(watchdog.android.extras.get("watchdog_miss_timeout_s"), Some(&IntentExtra::Int(60)));
    assert_eq!(
        watchdog.android.extras["watchdog_megamiss_timeout_s"].am_args("watchdog_megamiss_timeout_s"),
        ["--ei", "watchdog_megamiss_timeout_s", "60"]
    );
    assert_eq!(watchdog.sim.wakeups_scale, 0.994);
    assert_eq!(config("dns-refresh-1m").android.extras.get("dns_refresh_rate_s"), Some(&IntentExtra::Int(60)));
    assert_eq!(config("stats-flush-1m").ios.env.get("ENVOY_STATS_FLUSH_INTERVAL").map(String::as_str), Some("60s"));

    // `tuned` is the three together; `tuned-trace` adds trace logging on every platform.
    let tuned = config("tuned");
    for single in ["watchdog-1m", "dns-refresh-1m", "stats-flush-1m"] {
        let c = config(single);
        assert!(c.env.iter().all(|(k, v)| tuned.env.get(k) == Some(v)), "{single}");
        assert!(c.android.extras.iter().all(|(k, v)| tuned.android.extras.get(k) == Some(v)), "{single}");
    }
    assert_eq!(tuned.android.extras.len(), 4);
    let trace = config("tuned-trace");
    assert_eq!(trace.env.get("ENVOY_LOG_LEVEL").map(String::as_str), Some("trace"));
    assert_eq!(trace.args, ["--log-level", "trace"]);
    assert_eq!(trace.android.extras.get("log_level"), Some(&IntentExtra::Str("trace".into())));
    assert_eq!(trace.ios.args, ["-EnvoyLogLevel", "trace"]);
    assert_eq!((trace.sim.cpu_scale, trace.sim.memory_mb_add), (1.01, 0.0));
    assert_eq!(rb.workload.expected_requests(rb.duration), Some(18_000));
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
        // Real phones' runbooks name APKs a clone does not have: the next test.
        if path.ends_with(ANDROID_AUDIT) {
            continue;
        }
        if path.extension().is_some_and(|e| e == "toml") {
            load_runbook(&path, &lab).unwrap_or_else(|e| panic!("{}:\n{e}", path.display()));
            n += 1;
        }
    }
    assert!(n >= 2, "found {n} runbooks");
}

const ANDROID_AUDIT: &str = "runbooks/envoy-battery-audit-android.toml";

/// `lab.toml` with its commented Android phone (and the endpoint keys phones need) in use.
fn lab_with_the_commented_pixel() -> String {
    let text = std::fs::read_to_string("lab.toml").unwrap();
    let start = text.find("# [[device]]\n# name = \"pixel-1\"").expect("a commented pixel-1");
    let end = start + text[start..].find("\n#\n").expect("the block ends with an empty comment line");
    let uncomment = |t: &str| t.lines().map(|l| l.strip_prefix("# ").unwrap_or(l)).collect::<Vec<_>>().join("\n");
    let head = text[..start].replace("# endpoint_", "endpoint_");
    format!("{head}{}{}", uncomment(&text[start..end]), &text[end..])
}

#[test]
fn the_android_audit_plans_control_vs_envoy_on_the_commented_pixel_once_its_apks_are_there() {
    // On a clone the APKs are missing: one clear line each, naming the file and the fix.
    let err = load_runbook(Path::new(ANDROID_AUDIT), &repo_lab()).unwrap_err().to_string();
    assert!(
        err.contains("builds.control.android.apk: missing build file") && err.contains("build or copy the file there"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lab.toml"), lab_with_the_commented_pixel()).unwrap();
    std::fs::create_dir_all(dir.path().join("runbooks")).unwrap();
    std::fs::create_dir_all(dir.path().join("builds/android")).unwrap();
    for apk in ["control", "envoy"] {
        std::fs::write(dir.path().join(format!("builds/android/{apk}.apk")), format!("PK {apk}")).unwrap();
    }
    let rb_path = dir.path().join(ANDROID_AUDIT);
    std::fs::copy(ANDROID_AUDIT, &rb_path).unwrap();
    let lab = load_lab(&dir.path().join("lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    let pixel = lab.device("pixel-1").expect("the commented phone");
    assert_eq!(pixel.android().unwrap().serial, "0A1B2C3D");
    let rb = load_runbook(&rb_path, &lab).unwrap_or_else(|e| panic!("{e}"));
    let plan = lab::plan::build(&rb, &lab).unwrap();
    let variants: Vec<&str> = plan.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(variants, ["control", "envoy"]);
    assert!(plan.trials.iter().all(|t| t.device == "pixel-1"));
    assert_eq!(plan.trials.len(), 12);
    // The iPhone audit's workload and preconditions.
    let ios = load_runbook(Path::new("runbooks/envoy-battery-audit.toml"), &repo_lab()).unwrap();
    assert_eq!(rb.workload, ios.workload);
    assert_eq!(rb.preconditions, ios.preconditions);
    assert_eq!(rb.duration, ios.duration);
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

/// The audit's iPhone half: on a lab with real iPhones 6s the same runbook plans them, and
/// wants its three .ipa files (here made empty next to a copy of it).
#[test]
fn envoy_audit_runs_unchanged_on_a_lab_of_real_iphones() {
    let dir = tempfile::tempdir().unwrap();
    let lab_file = dir.path().join("lab.toml");
    std::fs::write(
        &lab_file,
        "[lab]\nname = \"shelf\"\nendpoint_bind = \"0.0.0.0:8765\"\nendpoint_url = \"http://192.0.2.10:8765\"\n\
         [[host]]\nname = \"local\"\n\
         [[device]]\nname = \"iphone-1\"\nplatform = \"ios\"\nmodel = \"iPhone 6s\"\ntether = \"manual\"\n\
         [device.ios]\nudid = \"0123456789abcdef0123456789abcdef01234567\"\n",
    )
    .unwrap();
    let lab = load_lab(&lab_file).unwrap_or_else(|e| panic!("{e}"));
    let rb_file = dir.path().join("envoy-battery-audit.toml");
    std::fs::copy("runbooks/envoy-battery-audit.toml", &rb_file).unwrap();
    let missing = load_runbook(&rb_file, &lab).unwrap_err().to_string();
    assert!(missing.contains("builds.control.ios.ipa: missing build file"), "{missing}");
    std::fs::create_dir_all(dir.path().join("builds")).unwrap();
    for b in ["control", "envoy-poll", "envoy-kqueue"] {
        std::fs::write(dir.path().join(format!("builds/{b}.ipa")), b.as_bytes()).unwrap();
    }
    let rb = load_runbook(&rb_file, &lab).unwrap_or_else(|e| panic!("{e}"));
    let plan = lab::plan::build(&rb, &lab).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["iphone-1"]);
    assert_eq!(plan.trials.len(), 3 * 6);
    assert!(rb.builds.iter().all(|b| b.ios.as_ref().is_some_and(|i| !i.sha256.is_empty())));
}
