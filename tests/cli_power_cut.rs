//! Simulated USB-only phones behind a hub that cuts power (a stand-in `uhubctl` on PATH):
//! losing the phone with its port is expected, its own log decides whether it charged,
//! and one that does not come back after re-tether goes offline.

mod common;

use common::TempLab;

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
    let bin = lab.dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = lab.dir.path().join("uhubctl.log");
    let stand_in = bin.join("uhubctl");
    common::stand_in_uhubctl(&stand_in, &format!("echo \"$*\" >> {}", log.display()));
    let runbook = lab.dir.path().join("rb.toml");
    std::fs::write(
        &runbook,
        "name = \"hub\"\nduration = \"30m\"\nrepeats = 2\nretries = 1\ndevices = [\"steady\", \"charger\", \"gone\"]\n\
         [builds.app]\nbaseline = true\n[builds.app.sim]\ncpu_pct = 10\nwakeups_per_s = 5\nmemory_mb = 20\n\
         [preconditions]\nuntethered = true\n[timeouts]\nreconnect = \"10m\"\n",
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = lab.cmd(&["run", runbook.to_str().unwrap()]).env("PATH", path).output().unwrap();
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
        reasons.iter().all(|r| r.contains("device charged during the soak") && r.contains("USB power was not cut")),
        "{reasons:?}"
    );
    let gone: Vec<String> = lab.sql("SELECT reasons FROM attempts WHERE device = 'gone'");
    assert_eq!(gone.len(), 1, "{gone:?}");
    assert!(gone[0].contains("not back within 10m"), "{gone:?}");
    let status: Vec<String> = lab.sql("SELECT state FROM device_status WHERE device = 'gone'");
    assert_eq!(status, ["offline"]);
    assert!(stdout.contains("[gone] OFFLINE"), "{stdout}");

    // Every port that went off came back on.
    let calls = std::fs::read_to_string(&log).unwrap();
    for port in 1..=3 {
        let switched: Vec<&str> = calls
            .lines()
            .filter(|l| l.contains(&format!("-p {port} ")))
            .map(|l| l.rsplit(' ').next().unwrap())
            .collect();
        assert!(!switched.is_empty() && switched.len() % 2 == 0, "port {port}: {switched:?}");
        assert!(switched.chunks(2).all(|c| c == ["off", "on"]), "port {port}: {switched:?}");
    }
}
