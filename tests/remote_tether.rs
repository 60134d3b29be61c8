//! Phones on a lab host reached over SSH (a real sshd on 127.0.0.1): the hub's
//! `uhubctl` runs on that host, and the devices of one host share one connection pool.

mod common;

use std::path::Path;

use common::sshd;
use common::{TempLab, executable};

/// Whether `program` is on this process's PATH (the lab machine's).
fn on_local_path(program: &str) -> bool {
    std::env::var("PATH").unwrap_or_default().split(':').any(|d| Path::new(d).join(program).is_file())
}

#[test]
fn uhubctl_runs_on_the_phones_host_and_cuts_power_around_each_soak() {
    // A stand-in `uhubctl` on the SSH host's PATH only: it notes where it ran (sshd sets
    // SSH_CONNECTION in its sessions) and its arguments.
    let bin = tempfile::tempdir().unwrap();
    let log = bin.path().join("uhubctl.log");
    common::stand_in_uhubctl(
        &bin.path().join("uhubctl"),
        &format!("printf '%s|%s\\n' \"${{SSH_CONNECTION:-none}}\" \"$*\" >> {}", log.display()),
    );
    let path = format!("SetEnv PATH={}:/usr/local/bin:/usr/bin:/bin", bin.path().display());
    let Some(s) = sshd::start_with(&path) else { return };
    assert!(!on_local_path("uhubctl"), "this test needs a lab machine without uhubctl on its PATH");

    // A USB-only phone on the shelf: unreachable while its port is off.
    let lab = TempLab::from_text(&format!(
        "[lab]\nname = \"shelf\"\n\n{}\n[[device]]\nname = \"pixel-on-shelf\"\nhost = \"shelf-1\"\nplatform = \"sim\"\n\
         model = \"Pixel 5\"\ntether = {{ uhubctl = {{ location = \"1-1.4\", port = 3 }} }}\n\
         [device.sim]\nemulates = \"android\"\nusb_only = true\n",
        s.host_table("")
    ));
    let runbook = lab.dir.path().join("rb.toml");
    std::fs::write(
        &runbook,
        "name = \"shelf\"\nduration = \"20m\"\nrepeats = 2\ndevices = [\"pixel-on-shelf\"]\n\
         [builds.app]\nbaseline = true\n[builds.app.sim]\ncpu_pct = 10\nwakeups_per_s = 5\nmemory_mb = 20\n\
         [preconditions]\nuntethered = true\n",
    )
    .unwrap();
    let out = lab.cmd(&["run", "--verbose", runbook.to_str().unwrap()]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [2]);

    let calls = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<(&str, &str)> = calls.lines().map(|l| l.split_once('|').unwrap()).collect();
    assert!(calls.iter().all(|(conn, _)| conn.starts_with("127.0.0.1 ")), "ran in an SSH session: {calls:?}");
    let args: Vec<&str> = calls.iter().map(|(_, a)| *a).collect();
    let (off, on) = ("-l 1-1.4 -p 3 -a off", "-l 1-1.4 -p 3 -a on");
    assert_eq!(args, [off, on, off, on], "power off before each soak and on after it, in that order");

    // In the run's own account: untether, then the soak (with the phone off USB), then re-tether.
    let lines: Vec<&str> = stdout.lines().filter(|l| l.contains("attempt 1: ") || l.contains("off USB")).collect();
    let first =
        |what: &str| lines.iter().position(|l| l.contains(what)).unwrap_or_else(|| panic!("no {what}: {lines:?}"));
    assert!(first(": untether") < first("off USB") && first("off USB") < first(": soak"));
    assert!(first(": soak") < first(": retether") && first(": retether") < first(": collect"));
}

/// A host device's app: works in short bursts for as long as it runs.
const APP: &str = "#!/bin/sh\nwhile :; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; sleep 0.1; done\n";

#[test]
fn two_devices_on_one_ssh_host_share_one_connection_pool() {
    let Some(s) = sshd::start() else { return };
    let pid = std::process::id();
    // Device names unique to this process: leftover reaping on the host is per device name.
    let devices: Vec<String> = (1..=2).map(|i| format!("pool-{i}-{pid}")).collect();
    let mut text = format!("[lab]\nname = \"pool\"\n\n{}", s.host_table("max_sessions = 1"));
    for d in &devices {
        text.push_str(&format!(
            "\n[[device]]\nname = \"{d}\"\nhost = \"shelf-1\"\nplatform = \"host\"\nmodel = \"lab box\"\n"
        ));
    }
    let lab = TempLab::from_text(&text);
    executable(&lab.dir.path().join("app.sh"), APP);
    let runbook = lab.dir.path().join("rb.toml");
    std::fs::write(
        &runbook,
        format!(
            "name = \"pool\"\nduration = \"1s\"\nrepeats = 2\ndevices = [{}]\n\
             [builds.app]\nbaseline = true\n[builds.app.host]\ncwd = \".\"\ncommand = [\"./app.sh\"]\n\
             [preconditions]\nload_max = 100\n",
            devices.iter().map(|d| format!("\"{d}\"")).collect::<Vec<_>>().join(", ")
        ),
    )
    .unwrap();
    let before = s.accepted_logins();
    let out = lab.cmd(&["run", runbook.to_str().unwrap()]).output().unwrap();
    // Validity is not the point here (one shared session makes a 1 s soak's two readings
    // queue behind the other device's commands on a loaded machine): trials ran, 0 or 4.
    assert!(
        matches!(out.status.code(), Some(0 | 4)),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let per_device: Vec<i64> = lab.sql("SELECT COUNT(DISTINCT device) FROM attempts");
    assert_eq!(per_device, [2], "both devices ran trials");
    // One transport for the host: its single session (max_sessions = 1) served both
    // devices. With a transport per device there would be a connection each.
    assert_eq!(s.accepted_logins() - before, 1, "SSH logins the server accepted");
}
