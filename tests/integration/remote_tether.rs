//! Devices on a lab host reached over SSH (a real sshd on 127.0.0.1) share one connection
//! pool. (The hub's `uhubctl` running on a phone's SSH host: tests/integration/hub_untether.rs.)

use crate::common;

use common::sshd;
use common::{TempLab, executable};

/// A host device's app: works in short bursts for as long as it runs.
const APP: &str = "#!/bin/sh\nwhile :; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; sleep 0.1; done\n";

#[test_needs::needs(sshd)]
#[test]
fn two_devices_on_one_ssh_host_share_one_connection_pool() {
    let s = sshd::start();
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
