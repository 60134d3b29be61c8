//! A whole campaign on an iPhone through the real binary, its `ios` backend and the real
//! idevice crate; only the phone is stood in for (examples/iphone, iOS 16): install over AFC,
//! launch over DVT with the trial's settings, the operator unplugging and plugging the cable
//! (`lab confirm` from another process), the sysdiagnose the operator triggers after
//! re-tether pulled through crash-report copy, and the untethered stretch read from its
//! powerlog. A soak whose powerlog shows charging is invalid.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use common::iphone::{StandIn, UDID, phone_toml};
use common::{TempLab, root};

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

fn ipa(dir: &Path, name: &str, bundle: &str) {
    let made = Command::new(common::example("iphone"))
        .args(["ipa", "--bundle-id", bundle, "--version", "7", "--out"])
        .arg(dir.join(name))
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
}

fn setup(standin: &StandIn) -> (TempLab, PathBuf) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let lab = TempLab::from_text(&format!(
        "[lab]\nname = \"ios\"\nendpoint_bind = \"0.0.0.0:{port}\"\nendpoint_url = \"http://lab-machine.invalid:{port}\"\n\n\
         [[host]]\nname = \"local\"\n\n\
         [[device]]\nname = \"iphone-1\"\nhost = \"local\"\nplatform = \"ios\"\nmodel = \"iPhone 14\"\ntether = \"manual\"\n\
         [device.ios]\nudid = \"{UDID}\"\nusbmuxd = \"{}\"\nsamples = [\"cpu\", \"energy\"]\n",
        standin.socket.display()
    ));
    ipa(lab.dir.path(), "Control.ipa", "io.example.control");
    ipa(lab.dir.path(), "Envoy.ipa", "io.example.envoy");
    let rb = lab.dir.path().join("ios.toml");
    std::fs::write(
        &rb,
        "name = \"ios\"\nduration = \"3s\"\nrepeats = 1\nretries = 0\norder = \"sequential\"\ndevices = [\"iphone-1\"]\n\n\
         [builds.control]\nbaseline = true\n[builds.control.ios]\nipa = \"Control.ipa\"\nbundle_id = \"io.example.control\"\n\n\
         [builds.envoy]\n[builds.envoy.ios]\nipa = \"Envoy.ipa\"\nbundle_id = \"io.example.envoy\"\n\n\
         [configs.dns-1m]\n[configs.dns-1m.ios]\nenv = { ENVOY_DNS_REFRESH_S = \"60\" }\nargs = [\"-EnvoyTrace\", \"YES\"]\n\n\
         [preconditions]\nuntethered = true\n",
    )
    .unwrap();
    (lab, rb)
}

/// The phone's battery as lockdown reports it: on the cable or off it.
fn plugged(standin: &StandIn, on: bool) {
    let file = standin.root().join(format!("phones/{UDID}.toml"));
    let text = phone_toml("")
        .replace("BatteryIsCharging = true", &format!("BatteryIsCharging = {on}"))
        .replace("ExternalConnected = true", &format!("ExternalConnected = {on}"));
    std::fs::write(file, text).unwrap();
}

#[test]
fn an_iphone_campaign_reads_the_untethered_soak_from_the_phones_own_powerlog() {
    let standin = StandIn::start(&[(UDID, "")]);
    let (lab, rb) = setup(&standin);
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("lab"))
        .current_dir(root())
        .env_remove("LAB_CONFIG")
        .args(["--lab", lab.lab.to_str().unwrap(), "run", rb.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut steps, mut unplugged_at, mut trial) = (String::new(), Vec::new(), 0.0, 0);
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        out.push_str(&line);
        out.push('\n');
        let Some(cmd) = line.contains("OPERATOR").then(|| line.split('`').nth(1)).flatten() else { continue };
        let args: Vec<&str> = cmd.split_whitespace().collect();
        assert_eq!(args[..2], ["lab", "confirm"], "{line}");
        let step = args.iter().skip_while(|a| **a != "--step").nth(1).expect("--step").to_string();
        match step.as_str() {
            "unplug" => {
                plugged(&standin, false);
                unplugged_at = now_s();
            }
            "plug-in" => plugged(&standin, true),
            "sysdiagnose" => {
                // The operator's button press: the second trial's powerlog shows it charging.
                let mut c = Command::new(common::example("iphone"));
                c.args(["sysdiagnose", "--root"]).arg(standin.root()).args(["--udid", UDID]);
                c.args(["--from", &format!("{:.3}", unplugged_at - 1.0), "--to", &format!("{:.3}", now_s() + 1.0)]);
                if trial == 1 {
                    c.args(["--charging-s", "2"]);
                }
                let made = c.output().unwrap();
                assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
                trial += 1;
            }
            other => panic!("unexpected step {other}: {line}"),
        }
        let o = lab.cmd(&args[1..]).output().unwrap();
        assert!(o.status.success(), "{cmd}: {}", String::from_utf8_lossy(&o.stderr));
        steps.push(step);
    }
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(steps, ["unplug", "plug-in", "sysdiagnose", "unplug", "plug-in", "sysdiagnose"], "{out}\n{err}");
    assert_eq!(status.code(), Some(4), "one trial charged: {out}\n{err}");

    // Launched over DVT with the trial's settings, in order; stopped after collection.
    let launches = standin.journalled("dvt", "launch");
    assert_eq!(launches.len(), 2, "{launches:?}");
    for l in &launches {
        assert_eq!(l["env"]["ENVOY_DNS_REFRESH_S"], "60", "{l}");
        assert_eq!(l["env"]["LAB_DURATION_MS"], "3000", "{l}");
        assert!(l["env"]["LAB_ENDPOINT_URL"].as_str().unwrap().starts_with("http://lab-machine.invalid:"), "{l}");
        assert_eq!(l["args"], serde_json::json!(["-EnvoyTrace", "YES"]), "{l}");
    }
    assert_eq!(standin.journalled("dvt", "kill").len(), 2);

    // The control trial: valid, its figures from the powerlog, its battery curve stored.
    let status: Vec<String> = lab.sql("SELECT status FROM attempts ORDER BY trial_idx");
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts ORDER BY trial_idx");
    let rows: Vec<(String, String)> = status.into_iter().zip(reasons).collect();
    assert_eq!(rows[0].0, "valid", "{rows:?}");
    assert_eq!(rows[1].0, "invalid", "{rows:?}");
    assert!(rows[1].1.contains("charg"), "{rows:?}");
    let metrics: Vec<String> = lab.sql("SELECT DISTINCT metric FROM measurements WHERE trial_idx = 0 ORDER BY metric");
    for m in ["battery_drop_pct", "charge_used_mah", "energy_j", "battery_temp_c", "cycle_count"] {
        assert!(metrics.iter().any(|x| x == m), "{m} missing from {metrics:?}");
    }
    // One value per metric: the soak's from the powerlog, the rest read over USB.
    let all: Vec<String> = lab.sql("SELECT metric FROM measurements WHERE trial_idx = 0");
    assert_eq!(all.len(), metrics.len(), "{all:?}");
    // Tethered samples stop at the unplug: nothing of an untethered soak is from them.
    for m in ["cpu_pct", "energy_level", "memory_mb"] {
        assert!(!metrics.iter().any(|x| x == m), "{m} in {metrics:?}");
    }
    let drop_source: Vec<String> =
        lab.sql("SELECT source FROM measurements WHERE trial_idx = 0 AND metric = 'charge_used_mah'");
    assert!(drop_source[0].contains("powerlog"), "{drop_source:?}");
    let series: Vec<String> = lab.sql("SELECT source FROM series WHERE trial_idx = 0");
    assert!(series.iter().any(|s| s.contains("powerlog")), "{series:?}");
    // Only the powerlog is kept of the sysdiagnose, and the phone keeps none of them.
    let kept: Vec<String> = lab.sql("SELECT artifact_dir FROM attempts ORDER BY trial_idx");
    let dir = lab.artifacts().join(&kept[0]);
    assert!(dir.join("powerlog.PLSQL").exists(), "{}", dir.display());
    assert!(!dir.join("sysdiagnose.tar.gz").exists());
    let left = standin.root().join(format!("crashes/{UDID}/DiagnosticLogs/sysdiagnose"));
    let left: Vec<_> = std::fs::read_dir(left).map(|d| d.flatten().collect()).unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
