//! `lab hubs` and `tether = { uhubctl = "auto" }` through the real binary, with the stand-in
//! `uhubctl` (standins/uhubctl) on PATH listing and switching described hubs.

use crate::common;

use common::TempLab;
use common::uhubctl::Hubs;
use serde_json::{Value, json};

/// Hub 1-1 switches per port; the hub on its port 4 (1-1.4) switches all ports together.
fn hubs() -> Value {
    let pixel = |serial: &str| json!({ "id": "18d1:4ee7", "vendor": "Google", "product": "Pixel 5", "serial": serial });
    json!({ "hubs": [
        { "location": "1-1", "id": "2109:2817", "vendor": "VIA Labs, Inc.", "product": "USB2.0 Hub", "usb": "2.10",
          "switching": "ppps", "ports": [{ "device": pixel("SIM0001") }, {}, { "powered": false }, {}] },
        { "location": "1-1.4", "id": "05e3:0610", "vendor": "GenesysLogic", "product": "USB2.1 Hub", "usb": "2.10",
          "switching": "ganged", "ports": [{ "device": pixel("SIM0002") }, {}] }
    ]})
}

fn phone(name: &str, serial: &str) -> String {
    format!(
        "\n[[device]]\nname = \"{name}\"\nplatform = \"sim\"\nmodel = \"Pixel 5\"\n\
         tether = {{ uhubctl = \"auto\" }}\n\
         [device.sim]\nemulates = \"android\"\nusb_serial = \"{serial}\"\nusb_only = true\n"
    )
}

/// A lab of three simulated phones (on the per-port hub, on the ganged one, on none) and
/// the stand-in uhubctl (standins/uhubctl) with `hubs()`.
fn hub_lab() -> (TempLab, Hubs) {
    let mut text = String::from("[lab]\nname = \"hubs\"\n");
    text += &phone("on-ppps", "SIM0001");
    text += &phone("on-ganged", "SIM0002");
    text += &phone("nowhere", "SIM0003");
    (TempLab::from_text(&text), Hubs::new(&hubs()))
}

fn runbook(lab: &TempLab, device: &str) -> std::path::PathBuf {
    let path = lab.dir.path().join("rb.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"hub\"\nduration = \"30m\"\nrepeats = 2\ndevices = [\"{device}\"]\n\
             [builds.app]\nbaseline = true\n[builds.app.sim]\ncpu_pct = 10\nwakeups_per_s = 5\nmemory_mb = 20\n\
             [preconditions]\nuntethered = true\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn lab_hubs_lists_every_port_and_names_the_phone_on_it() {
    let (lab, hubs) = hub_lab();
    let out = lab.cmd(&["hubs"]).envs(hubs.env()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    insta::assert_snapshot!("hubs_table", stdout);

    let out = lab.cmd(&["hubs", "--json", "--host", "local"]).envs(hubs.env()).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let devices = &v[0]["devices"];
    assert_eq!(devices[0]["device"], "on-ppps");
    assert_eq!(
        (devices[0]["found"]["location"].as_str(), devices[0]["found"]["port"].as_u64()),
        (Some("1-1"), Some(1))
    );
    assert!(devices[1]["found"]["problem"].as_str().unwrap().contains("(ganged)"), "{devices}");
    assert!(devices[2]["found"]["problem"].as_str().unwrap().starts_with("USB serial SIM0003 is on no port"));
    assert_eq!(v[0]["listing"]["hubs"][1]["device"]["switching"], "ganged");
}

#[test]
fn lab_hubs_refuses_an_unknown_host_and_says_when_uhubctl_is_missing() {
    let (lab, _hubs) = hub_lab();
    let out = lab.cmd(&["hubs", "--host", "shelf-9"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--host shelf-9: no such [[host]]"));
    // A PATH without uhubctl: the host cannot be read, and says why.
    let out = lab.cmd(&["hubs"]).env("PATH", "/nonexistent").output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("local: "), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn an_auto_tether_is_resolved_by_serial_and_switches_that_port() {
    let (lab, hubs) = hub_lab();
    let out = lab.cmd(&["run", runbook(&lab, "on-ppps").to_str().unwrap()]).envs(hubs.env()).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let calls: Vec<String> = hubs.calls().into_iter().map(|(args, _)| args).collect();
    // Found by `-f`; then each attempt: the phone seen on the port, off, gone, on, back.
    let attempt = ["-l 1-1 -p 1", "-l 1-1 -p 1 -a off", "-l 1-1 -p 1", "-l 1-1 -p 1 -a on", "-l 1-1 -p 1"];
    assert_eq!(calls, [&["-f"][..], &attempt, &attempt].concat());
    assert!(hubs.powered("1-1", 1));
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [2]);
}

#[test]
fn an_auto_tether_on_a_ganged_hub_or_on_no_hub_stops_the_run_before_any_trial() {
    let (lab, hubs) = hub_lab();
    for (device, said) in [
        (
            "on-ganged",
            "on-ganged: tether = { uhubctl = \"auto\" }: it is on hub 1-1.4 port 1, whose hub switches all its ports together (ganged); fix: move it to a hub with per-port power switching",
        ),
        (
            "nowhere",
            "nowhere: tether = { uhubctl = \"auto\" }: USB serial SIM0003 is on no port of the 2 hub(s) uhubctl lists",
        ),
    ] {
        let out = lab.cmd(&["run", runbook(&lab, device).to_str().unwrap()]).envs(hubs.env()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        assert!(stderr.contains(said), "{stderr}");
        assert!(lab.campaigns().is_empty(), "nothing recorded");
    }
}
