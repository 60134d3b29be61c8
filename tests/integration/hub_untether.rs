//! The whole untether / re-tether path of a simulated phone on the stand-in uhubctl
//! (standins/uhubctl), through `lab run`: the port listed before the cut (is the phone
//! there, by its USB serial?), switched off, listed until the phone has left the bus,
//! switched on after the soak, listed until it is back — locally and with the phone's
//! host the SSH test host. The phone (`[device.sim] standin_hub`) reads its VBUS and bus
//! from the stand-in, so a port that keeps VBUS keeps it charging and its trials invalid.

use crate::common;

use common::uhubctl::{Hubs, pixel_runbook};
use common::{TempLab, sshd};
use serde_json::{Value, json};

const PIXEL: &str = "2A111FDH200B4Z";

/// A VIA Labs USB 3 hub (USB 2 half 1-1, USB 3 half 2-1) with the phone on port 2; the
/// phone's hooks append `bus attached|detached` and `vbus usb|none` to `events`.
fn hub_with_phone(events: &std::path::Path, port: Value) -> Value {
    let hook = |what: &str| json!(["sh", "-c", format!("echo {what} \"$1\" >> {}", events.display()), "hook"]);
    let mut port2 = port;
    port2["device"] = json!({ "id": "18d1:4ee7", "vendor": "Google", "product": "Pixel 7", "serial": PIXEL,
        "on_vbus": hook("vbus"), "on_bus": hook("bus") });
    json!({ "hubs": [
        { "location": "1-1", "id": "2109:2822", "vendor": "VIA Labs, Inc.", "product": "USB2.0 Hub",
          "usb": "2.10", "switching": "ppps", "twin": "2-1", "ports": [{}, port2, {}, {}] },
        { "location": "2-1", "id": "2109:0822", "vendor": "VIA Labs, Inc.", "product": "USB3.1 Hub",
          "usb": "3.20", "switching": "ppps", "ports": [{}, {}, {}, {}] }
    ]})
}

/// A lab with one USB-only simulated Pixel on the stand-in hub, on `host` (its `[[host]]`
/// table in `host_table`), tethered by `tether`; a two-trial runbook.
fn campaign(host_table: &str, host: &str, tether: &str) -> (TempLab, std::path::PathBuf) {
    let lab = TempLab::from_text(&format!(
        "[lab]\nname = \"hub\"\n\n{host_table}\n[[device]]\nname = \"pixel\"\nhost = \"{host}\"\nplatform = \"sim\"\n\
         model = \"Pixel 7\"\ntether = {tether}\n[device.sim]\nemulates = \"android\"\nusb_only = true\n\
         usb_serial = \"{PIXEL}\"\nstandin_hub = true\n",
    ));
    let runbook = pixel_runbook(&lab);
    (lab, runbook)
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(String::from).collect()
}

/// One attempt's uhubctl calls: is it here, off, gone, on, back.
const ATTEMPT: [&str; 5] = ["-l 1-1 -p 2", "-l 1-1 -p 2 -a off", "-l 1-1 -p 2", "-l 1-1 -p 2 -a on", "-l 1-1 -p 2"];

#[test]
fn a_phone_on_the_stand_in_hub_leaves_the_bus_for_each_soak_and_comes_back() {
    let hubs = Hubs::new(&json!({}));
    let events = hubs.dir.path().join("events");
    std::fs::write(&hubs.state, hub_with_phone(&events, json!({})).to_string()).unwrap();
    let (lab, runbook) = campaign("", "local", "{ uhubctl = { location = \"1-1\", port = 2 } }");
    let out = lab.cmd(&["run", "--verbose", runbook.to_str().unwrap()]).envs(hubs.env()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [2], "{stdout}");

    let calls: Vec<String> = hubs
        .calls()
        .into_iter()
        .map(|(args, ssh)| {
            assert_eq!(ssh, None);
            args
        })
        .collect();
    assert_eq!(calls, [ATTEMPT, ATTEMPT].concat(), "the exact commands, in order");
    // The phone left the bus and lost VBUS at each cut, and got both back after each soak.
    let cycle = ["bus detached", "vbus none", "vbus usb", "bus attached"];
    assert_eq!(lines(&events), [cycle, cycle].concat());
    assert!(hubs.powered("1-1", 2) && hubs.powered("2-1", 2), "both halves powered at the end");
    // It soaked off USB: the runner saw it gone, and its own log shows no charging.
    assert!(stdout.contains("off USB"), "{stdout}");
    assert_eq!(lab.sql::<String>("SELECT DISTINCT untether FROM attempts"), ["power-cut"]);
}

/// `lab care` left the phone's port off (and died, or the campaign took the phone between
/// its passes): the campaign switches it on before it touches the phone.
#[test]
fn a_port_lab_care_left_off_is_switched_on_before_the_campaign_touches_the_phone() {
    let hubs = Hubs::new(&json!({}));
    let events = hubs.dir.path().join("events");
    std::fs::write(&hubs.state, hub_with_phone(&events, json!({})).to_string()).unwrap();
    let (lab, runbook) = campaign("", "local", "{ uhubctl = { location = \"1-1\", port = 2 } }");
    assert!(hubs.command(&["-l", "1-1", "-p", "2", "-a", "off"]).status().unwrap().success());
    assert!(!hubs.powered("1-1", 2));
    let store = lab::store::Store::open(&lab.store()).unwrap();
    store.set_port_cut("pixel", "1-1:2", "2026-12-04T12:00:00Z").unwrap();
    drop(store);
    let before = hubs.calls().len();

    let out = lab.cmd(&["run", runbook.to_str().unwrap()]).envs(hubs.env()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("[pixel] port 1-1:2 was left off by `lab care`: switched on"), "{stdout}");
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [2], "{stdout}");
    let calls: Vec<String> = hubs.calls().into_iter().skip(before).map(|(args, _)| args).collect();
    assert_eq!(calls[0], "-l 1-1 -p 2 -a on", "the first thing done is switching the port on: {calls:?}");
    assert!(lab.sql::<String>("SELECT device FROM port_cuts").is_empty());
    assert!(hubs.powered("1-1", 2));
}

#[test]
fn a_port_that_keeps_vbus_gives_invalid_trials_that_name_the_hub_port() {
    let hubs = Hubs::new(&json!({}));
    let events = hubs.dir.path().join("events");
    std::fs::write(&hubs.state, hub_with_phone(&events, json!({ "vbus_stays": true })).to_string()).unwrap();
    let (lab, runbook) = campaign("", "local", "{ uhubctl = { location = \"1-1\", port = 2 } }");
    let out = lab.cmd(&["run", runbook.to_str().unwrap()]).envs(hubs.env()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [0], "{stdout}");
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts");
    assert!(
        !reasons.is_empty()
            && reasons.iter().all(|r| r
                .contains("the phone charged during the soak — does hub 1-1 port 2 really cut VBUS? (charging for ")),
        "{reasons:?}"
    );
    // Off the bus at each cut (so the tether's wait passed), never off VBUS.
    assert!(lines(&events).iter().all(|e| e.starts_with("bus ")), "{:?}", lines(&events));
    assert!(lines(&events).contains(&"bus detached".to_string()));
    assert!(hubs.powered("1-1", 2), "powered at the end");
}

#[test_needs::needs(sshd)]
#[test]
fn on_the_ssh_host_the_auto_port_is_found_by_serial_and_switched_in_its_sessions() {
    let hubs = Hubs::new(&json!({}));
    let events = hubs.dir.path().join("events");
    std::fs::write(&hubs.state, hub_with_phone(&events, json!({})).to_string()).unwrap();
    let s = sshd::start_with(&hubs.sshd_env());
    // The lab machine's own `uhubctl` (a lab host has Debian's) is one that only says it
    // ran: nothing may run here, whatever this machine has installed.
    let here = tempfile::tempdir().unwrap();
    let ran_here = here.path().join("ran");
    let local = here.path().join("uhubctl");
    std::fs::write(&local, format!("#!/bin/sh\necho \"$@\" >> '{}'\nexit 1\n", ran_here.display())).unwrap();
    std::fs::set_permissions(&local, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", here.path().display(), std::env::var("PATH").unwrap_or_default());
    let (lab, runbook) = campaign(&s.host_table(""), "shelf-1", "{ uhubctl = \"auto\" }");
    // Only the SSH host has the stand-in: the lab's own environment has no UHUBCTL_*.
    let out = lab.cmd(&["run", "--verbose", runbook.to_str().unwrap()]).env("PATH", path).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [2], "{stdout}");

    assert!(!ran_here.exists(), "uhubctl ran on the lab machine: {:?}", std::fs::read_to_string(&ran_here));
    let calls = hubs.calls();
    assert!(
        calls.iter().all(|(_, ssh)| ssh.as_deref().is_some_and(|c| c.starts_with("127.0.0.1 "))),
        "every call ran in an SSH session: {calls:?}"
    );
    let args: Vec<&str> = calls.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(args, [&["-f"][..], &ATTEMPT, &ATTEMPT].concat(), "auto: `uhubctl -f` once, then each attempt");
    let cycle = ["bus detached", "vbus none", "vbus usb", "bus attached"];
    assert_eq!(lines(&events), [cycle, cycle].concat());
    assert!(hubs.powered("1-1", 2) && hubs.powered("2-1", 2));

    // The run's own account: untether, the soak with the phone off USB, re-tether.
    let said: Vec<&str> = stdout.lines().filter(|l| l.contains("attempt 1: ") || l.contains("off USB")).collect();
    let first =
        |what: &str| said.iter().position(|l| l.contains(what)).unwrap_or_else(|| panic!("no {what}: {said:?}"));
    assert!(first(": untether") < first("off USB") && first("off USB") < first(": soak"));
    assert!(first(": soak") < first(": retether") && first(": retether") < first(": collect"));
}
