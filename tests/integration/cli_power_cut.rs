//! Simulated USB-only phones behind a hub that cuts power (the stand-in `uhubctl` on PATH):
//! losing the phone with its port is expected, its own log decides whether it charged,
//! and one that does not come back after re-tether goes offline.

use crate::common;

use common::TempLab;
use common::uhubctl::{Hubs, usb2_hub};
use serde_json::json;

fn phone(name: &str, model: &str, port: u32, faults: &str) -> String {
    format!(
        "\n[[device]]\nname = \"{name}\"\nplatform = \"sim\"\nmodel = \"{model}\"\n\
         tether = {{ uhubctl = {{ location = \"2-1\", port = {port} }} }}\n\
         [device.sim]\nemulates = \"android\"\nseed = {port}\nusb_only = true\n{faults}"
    )
}

#[test]
fn phones_that_vanish_with_their_port_give_valid_trials_and_their_logs_decide() {
    let mut text = String::from("[lab]\nname = \"hub\"\n");
    text += &phone("steady", "Pixel 5", 1, "");
    text += &phone("charger", "Pixel 6", 2, "[device.sim.faults]\ncharging_during_soak = 1\n");
    text += &phone("gone", "Pixel 7", 3, "[device.sim.faults]\nstays_lost = 1\nreconnect_after = \"6h\"\n");
    let lab = TempLab::from_text(&text);
    // The phones are not described on the hub (no USB serial): the tether switches their
    // ports without waiting for them on the bus, and each phone believes its tether.
    let hubs = Hubs::new(&usb2_hub("2-1", vec![json!({}); 4]));
    let runbook = lab.dir.path().join("rb.toml");
    std::fs::write(
        &runbook,
        "name = \"hub\"\nduration = \"30m\"\nrepeats = 2\nretries = 1\ndevices = [\"steady\", \"charger\", \"gone\"]\n\
         [builds.app]\nbaseline = true\n[builds.app.sim]\ncpu_pct = 10\nwakeups_per_s = 5\nmemory_mb = 20\n\
         [preconditions]\nuntethered = true\n[timeouts]\nreconnect = \"10m\"\n",
    )
    .unwrap();
    let out = lab.cmd(&["run", runbook.to_str().unwrap()]).envs(hubs.env()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // A device offline with trials still to run: exit 3, resumable.
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));

    let per = |device: &str, status: &str| -> i64 {
        lab.sql(&format!("SELECT COUNT(*) FROM attempts WHERE device = '{device}' AND status = '{status}'"))[0]
    };
    assert_eq!((per("steady", "valid"), per("steady", "invalid")), (2, 0), "lost with its port, then back: valid");
    assert_eq!(per("charger", "valid"), 0);
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts WHERE device = 'charger'");
    assert_eq!(reasons.len(), 4, "two trials, each tried twice");
    assert!(
        reasons.iter().all(|r| r.contains("the phone charged during the soak — does hub 2-1 port 2 really cut VBUS?")),
        "{reasons:?}"
    );
    let gone: Vec<String> = lab.sql("SELECT reasons FROM attempts WHERE device = 'gone'");
    assert_eq!(gone.len(), 1, "{gone:?}");
    assert!(gone[0].contains("not back within 10m"), "{gone:?}");
    let status: Vec<String> = lab.sql("SELECT state FROM device_status WHERE device = 'gone'");
    assert_eq!(status, ["offline"]);
    assert!(stdout.contains("[gone] OFFLINE"), "{stdout}");

    // Every port that went off came back on.
    let calls: Vec<String> = hubs.calls().into_iter().map(|(args, _)| args).collect();
    for port in 1..=3 {
        let switched: Vec<&str> = calls
            .iter()
            .filter(|l| l.starts_with(&format!("-l 2-1 -p {port} -a ")))
            .map(|l| l.rsplit(' ').next().unwrap())
            .collect();
        assert!(!switched.is_empty() && switched.len().is_multiple_of(2), "port {port}: {switched:?}");
        assert!(switched.chunks(2).all(|c| c == ["off", "on"]), "port {port}: {switched:?}");
        assert!(hubs.powered("2-1", port as usize), "port {port}");
    }
}
