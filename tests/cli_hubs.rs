//! `lab hubs` and `tether = { uhubctl = "auto" }` through the real binary, with a stand-in
//! `uhubctl` on PATH that lists hubs in uhubctl 2.x's format and switches ports.

mod common;

use common::TempLab;

/// Hub 1-1 switches per port; the hub on its port 4 (1-1.4) switches all ports together.
const LISTING: &str = "\
Current status for hub 1-1 [2109:2817 VIA Labs, Inc. USB2.0 Hub, USB 2.10, 4 ports, ppps]
  Port 1: 0503 power highspeed enable connect [18d1:4ee7 Google Pixel 5 SIM0001]
  Port 2: 0100 power
  Port 3: 0000 off
  Port 4: 0503 power highspeed enable connect [05e3:0610 GenesysLogic USB2.1 Hub, USB 2.10, 4 ports, ganged]
Current status for hub 1-1.4 [05e3:0610 GenesysLogic USB2.1 Hub, USB 2.10, 4 ports, ganged]
  Port 1: 0503 power highspeed enable connect [18d1:4ee7 Google Pixel 5 SIM0002]
  Port 2: 0100 power
";

fn phone(name: &str, serial: &str) -> String {
    format!(
        "\n[[device]]\nname = \"{name}\"\nplatform = \"sim\"\nmodel = \"Pixel 5\"\n\
         tether = {{ uhubctl = \"auto\" }}\n\
         [device.sim]\nemulates = \"android\"\nusb_serial = \"{serial}\"\nusb_only = true\n"
    )
}

/// A lab of three simulated phones (on the per-port hub, on the ganged one, on none) and
/// a PATH whose `uhubctl` lists `LISTING` for `-f` and switches otherwise (logged).
fn hub_lab() -> (TempLab, String) {
    let mut text = String::from("[lab]\nname = \"hubs\"\n");
    text += &phone("on-ppps", "SIM0001");
    text += &phone("on-ganged", "SIM0002");
    text += &phone("nowhere", "SIM0003");
    let lab = TempLab::from_text(&text);
    let bin = lab.dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let listing = lab.dir.path().join("listing.txt");
    std::fs::write(&listing, LISTING).unwrap();
    let log = lab.dir.path().join("uhubctl.log");
    common::stand_in_uhubctl(
        &bin.join("uhubctl"),
        &format!(
            "echo \"$*\" >> {}\nif [ \"$*\" = \"-f\" ]; then cat {}; exit 0; fi",
            log.display(),
            listing.display()
        ),
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    (lab, path)
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
    let (lab, path) = hub_lab();
    let out = lab.cmd(&["hubs"]).env("PATH", &path).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    insta::assert_snapshot!("hubs_table", stdout);

    let out = lab.cmd(&["hubs", "--json", "--host", "local"]).env("PATH", &path).output().unwrap();
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
    let (lab, _) = hub_lab();
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
    let (lab, path) = hub_lab();
    let out = lab.cmd(&["run", runbook(&lab, "on-ppps").to_str().unwrap()]).env("PATH", &path).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let calls = std::fs::read_to_string(lab.dir.path().join("uhubctl.log")).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls, ["-f", "-l 1-1 -p 1 -a off", "-l 1-1 -p 1 -a on", "-l 1-1 -p 1 -a off", "-l 1-1 -p 1 -a on"]);
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [2]);
}

#[test]
fn an_auto_tether_on_a_ganged_hub_or_on_no_hub_stops_the_run_before_any_trial() {
    let (lab, path) = hub_lab();
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
        let out = lab.cmd(&["run", runbook(&lab, device).to_str().unwrap()]).env("PATH", &path).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        assert!(stderr.contains(said), "{stderr}");
        assert!(lab.campaigns().is_empty(), "nothing recorded");
    }
}
