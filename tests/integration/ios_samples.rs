//! Tethered samples of an iPhone through the real binary, its `ios` backend and the real
//! idevice crate; only the phone is stood in for (standins/iphone, iOS 16): two builds whose
//! apps differ in CPU, memory and energy (their profiles ship in the .ipa), a tethered
//! campaign with `[device.ios] samples = ["energy", "cpu", "packets"]`, the apps sending
//! real HTTP requests to the lab's endpoint, which the phone's packet tap counts a second time.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::TempLab;
use common::iphone::{StandIn, UDID, iphone_lab, phone_toml, phone17_toml};

fn ipa(dir: &Path, name: &str, bundle: &str, cpu: &str, mb: &str, cost: &str) {
    let made = Command::new(common::standin("iphone"))
        .args(["ipa", "--bundle-id", bundle, "--version", "3", "--cpu-pct", cpu, "--footprint-mb", mb])
        .args(["--energy-cost", cost, "--out"])
        .arg(dir.join(name))
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
}

fn setup(standin: &StandIn, samples: &str) -> (TempLab, std::path::PathBuf) {
    let lab = iphone_lab(standin, &format!("samples = {samples}\n"));
    // The seed's figures: control 12 % CPU, 6 MB, energy 1/20; Envoy on poll 185 %, 12 MB, 12/20.
    ipa(lab.dir.path(), "Control.ipa", "io.example.control", "12", "6", "1");
    ipa(lab.dir.path(), "Envoy.ipa", "io.example.envoy", "185", "12", "12");
    let rb = lab.dir.path().join("tethered.toml");
    std::fs::write(
        &rb,
        "name = \"tethered\"\nduration = \"4s\"\nrepeats = 1\nretries = 0\norder = \"sequential\"\ndevices = [\"iphone-1\"]\n\n\
         [builds.control]\nbaseline = true\n[builds.control.ios]\nipa = \"Control.ipa\"\nbundle_id = \"io.example.control\"\n\n\
         [builds.envoy]\n[builds.envoy.ios]\nipa = \"Envoy.ipa\"\nbundle_id = \"io.example.envoy\"\n\n\
         [workload]\nrequest_interval = \"200ms\"\nrequest_tolerance = \"20%\"\n\n\
         [preconditions]\nuntethered = false\napp_foreground = false\n",
    )
    .unwrap();
    (lab, rb)
}

/// The phone resolves the lab's name to this machine, as a phone on the lab's Wi-Fi would.
const ON_THE_LAB_NETWORK: &str = "hosts = { \"lab-machine.invalid\" = \"127.0.0.1\" }";

fn value(lab: &TempLab, build: &str, metric: &str) -> (f64, String) {
    let q = format!(
        "SELECT m.value || '|' || m.source FROM measurements m JOIN trials t ON t.idx = m.trial_idx \
          WHERE t.build = '{build}' AND m.metric = '{metric}'"
    );
    let rows: Vec<String> = lab.sql(&q);
    assert_eq!(rows.len(), 1, "{build} {metric}: {rows:?}");
    let (v, s) = rows[0].split_once('|').unwrap();
    (v.parse().unwrap(), s.to_string())
}

#[test]
fn a_tethered_iphone_trial_is_sampled_live_for_energy_cpu_memory_and_its_packets() {
    let standin = StandIn::start_files(&[(UDID, phone_toml(ON_THE_LAB_NETWORK))]);
    sampled_live(&standin);
    assert!(standin.journalled("coredeviceproxy", "handshake").is_empty(), "iOS 16: lockdown's services");
}

#[test]
fn on_ios_17_the_samples_come_over_rsd_inside_the_tunnel() {
    let standin = StandIn::start_files(&[(UDID, phone17_toml(ON_THE_LAB_NETWORK))]);
    sampled_live(&standin);
    // Preflight, two launches and stops, two is-running checks and three samplers a trial.
    let tunnels = standin.journalled("coredeviceproxy", "handshake");
    assert!(tunnels.len() >= 13, "{tunnels:?}");
}

/// A tethered campaign of the two builds with every sample, checked against their profiles.
fn sampled_live(standin: &StandIn) {
    let (lab, rb) = setup(standin, "[\"energy\", \"cpu\", \"packets\"]");
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("OPERATOR"), "a tethered trial asks no unplug and no sysdiagnose: {text}");

    let status: Vec<String> = lab.sql("SELECT status || ' ' || reasons FROM attempts ORDER BY trial_idx");
    assert_eq!(status.len(), 2, "{status:?}");
    for s in &status {
        assert!(s.starts_with("valid"), "{status:?}");
    }
    // Each app's own profile, read back through the gauge and sysmontap.
    for (build, cpu, mb, cost) in [("control", 12.0, 6.0, 1.0), ("envoy", 185.0, 12.0, 12.0)] {
        let (c, src) = value(&lab, build, "cpu_pct");
        assert!((c - cpu).abs() <= 0.1 * cpu, "{build} cpu {c} vs {cpu}");
        assert!(src.contains("sysmontap"), "{src}");
        let (m, src) = value(&lab, build, "memory_mb");
        assert!((m - mb).abs() <= 0.1 * mb, "{build} memory {m} vs {mb}");
        assert!(src.contains("physFootprint"), "{src}");
        let (e, src) = value(&lab, build, "energy_level");
        assert!((e - cost).abs() <= 0.1 * cost, "{build} energy {e} vs {cost}");
        assert!(src.contains("unitless"), "the gauge's cost is never called joules: {src}");
        // The phone's packet tap counts the requests the endpoint counted.
        let (wire, src) = value(&lab, build, "requests");
        assert!(src.contains("pcapd"), "{src}");
        let (seen, _) = value(&lab, build, "endpoint_requests");
        assert!(seen >= 10.0, "{build}: 4 s at 200 ms: {seen}");
        assert!((wire - seen).abs() <= 1.0, "{build}: wire {wire} vs endpoint {seen}");
        let (packets, _) = value(&lab, build, "net_packets");
        assert!(packets >= 2.0 * wire, "a request and its answer at least: {packets} vs {wire}");
    }
    // The samplers were started and stopped on the phone, one connection each.
    for (service, request) in [("dvt", "start_sampling"), ("dvt", "stop_sampling"), ("pcapd", "connect")] {
        assert_eq!(standin.journalled(service, request).len(), 2, "{service} {request}: {:?}", standin.journal());
    }
}

#[test]
fn without_samples_nothing_is_sampled() {
    let standin = StandIn::start(&[(UDID, ON_THE_LAB_NETWORK)]);
    let (lab, rb) = setup(&standin, "[]");
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let metrics: Vec<String> = lab.sql("SELECT DISTINCT metric FROM measurements ORDER BY metric");
    for m in ["cpu_pct", "energy_level", "memory_mb", "net_packets"] {
        assert!(!metrics.iter().any(|x| x == m), "{m} in {metrics:?}");
    }
    assert!(metrics.iter().any(|x| x == "endpoint_requests"), "{metrics:?}");
    assert!(standin.journalled("pcapd", "connect").is_empty());
}

#[test]
fn an_app_ios_ended_during_the_soak_makes_the_trial_invalid() {
    let standin = StandIn::start(&[(UDID, ON_THE_LAB_NETWORK)]);
    let (lab, rb) = setup(&standin, "[]");
    // One trial is enough: the control build alone.
    let text = std::fs::read_to_string(&rb).unwrap();
    let envoy = "[builds.envoy]\n[builds.envoy.ios]\nipa = \"Envoy.ipa\"\nbundle_id = \"io.example.envoy\"\n\n";
    assert!(text.contains(envoy));
    std::fs::write(&rb, text.replace(envoy, "")).unwrap();
    let mut run = std::process::Command::new(assert_cmd::cargo::cargo_bin("lab"))
        .current_dir(common::root())
        .env_remove("LAB_CONFIG")
        .args(["--lab", lab.lab.to_str().unwrap(), "run", rb.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // jetsam: once the app was launched, the phone ends it.
    let started = std::time::Instant::now();
    while standin.journalled("dvt", "launch").is_empty() {
        assert!(started.elapsed().as_secs() < 60, "never launched: {:?}", standin.journal());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let procs = standin.root().join(format!("phones/{UDID}.processes.json"));
    let mut p: serde_json::Value = serde_json::from_slice(&std::fs::read(&procs).unwrap()).unwrap();
    p["running"] = serde_json::json!([]);
    std::fs::write(&procs, serde_json::to_vec(&p).unwrap()).unwrap();
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(4), "the only trial failed");
    let rows: Vec<String> = lab.sql("SELECT status || ' ' || reasons FROM attempts");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0].starts_with("invalid") && rows[0].contains("app died during the soak (pid "), "{rows:?}");
    let asked = standin.journalled("dvt", "is_running");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["running"], false);
}
