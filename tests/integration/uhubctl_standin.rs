//! The stand-in `uhubctl` (standins/uhubctl) through its binary, found on PATH under
//! uhubctl's name: listings and switching of described hubs end to end through its JSON
//! state, read back by the lab's own parser (`lab::collect::hubs::uhubctl`), parallel runs, the
//! devices' hooks, its own commands, and a run in an SSH session of the test sshd. Its output
//! format is checked line by line in its unit tests (`cargo test -p uhubctl`).

use crate::common;

use common::uhubctl::{Hubs, pixel_runbook};
use common::{TempLab, sshd};
use lab::collect::hubs::uhubctl::{Block, Switching, parse};
use serde_json::{Value, json};

const PIXEL: &str = "2A111FDH200B4Z";

/// A VIA Labs USB 3 hub (USB2 half 1-1, USB3 half 2-1) with a phone on port 2.
fn via_hub(phone: Value) -> Value {
    json!({ "hubs": [
        { "location": "1-1", "id": "2109:2822", "vendor": "VIA Labs, Inc.", "product": "USB2.0 Hub",
          "usb": "2.10", "switching": "ppps", "twin": "2-1",
          "ports": [{}, { "device": phone }, {}, {}] },
        { "location": "2-1", "id": "2109:0822", "vendor": "VIA Labs, Inc.", "product": "USB3.1 Hub",
          "usb": "3.20", "switching": "ppps", "ports": [{}, {}, {}, {}] }
    ]})
}

fn pixel() -> Value {
    json!({ "id": "18d1:4ee7", "vendor": "Google", "product": "Pixel 7", "serial": PIXEL })
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(mut c: std::process::Command) -> Run {
    let out = c.output().unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// The port lines of `hub`'s last block of `kind` ("Current" or "New") in uhubctl's output.
fn block(stdout: &str, kind: &str, hub: &str) -> Vec<String> {
    let head = format!("{kind} status for hub {hub} [");
    let lines: Vec<&str> = stdout.lines().collect();
    let start = lines.iter().rposition(|l| l.starts_with(&head)).unwrap_or_else(|| panic!("no {head}: {stdout}"));
    lines[start + 1..].iter().take_while(|l| l.starts_with("  Port ")).map(|l| l.to_string()).collect()
}

#[test]
fn a_port_switched_off_and_on_through_the_binary_changes_the_state_and_the_listing() {
    let hubs = Hubs::new(&via_hub(pixel()));
    let listing = run(hubs.command(&[]));
    assert_eq!((listing.code, listing.stderr.as_str()), (Some(0), ""));
    assert_eq!(
        block(&listing.stdout, "Current", "1-1"),
        [
            "  Port 1: 0100 power",
            "  Port 2: 0503 power highspeed enable connect [18d1:4ee7 Google Pixel 7 2A111FDH200B4Z]",
            "  Port 3: 0100 power",
            "  Port 4: 0100 power",
        ]
    );

    let off = run(hubs.command(&["-l", "1-1", "-p", "2", "-a", "off"]));
    assert_eq!(off.code, Some(0), "{}", off.stderr);
    assert_eq!(block(&off.stdout, "New", "1-1"), ["  Port 2: 0000 off"]);
    assert_eq!(block(&off.stdout, "New", "2-1"), ["  Port 2: 00a0 off"], "the USB3 half went with it");
    assert!(!hubs.powered("1-1", 2) && !hubs.powered("2-1", 2) && hubs.powered("1-1", 1));
    assert_eq!(run(hubs.command(&["--standin-vbus", "1-1", "2"])).stdout, "off\n");

    let on = run(hubs.command(&["-l", "1-1", "-p", "2", "-a", "on"]));
    assert_eq!(block(&on.stdout, "New", "1-1"), ["  Port 2: 0101 power connect []"], "back, not enumerated yet");
    let later = run(hubs.command(&["-l", "1-1", "-p", "2"]));
    assert_eq!(
        block(&later.stdout, "Current", "1-1"),
        ["  Port 2: 0503 power highspeed enable connect [18d1:4ee7 Google Pixel 7 2A111FDH200B4Z]"]
    );
    let calls: Vec<String> = hubs
        .calls()
        .into_iter()
        .map(|(args, ssh)| {
            assert_eq!(ssh, None, "not in an SSH session");
            args
        })
        .collect();
    assert_eq!(
        calls,
        ["", "-l 1-1 -p 2 -a off", "-l 1-1 -p 2 -a on", "-l 1-1 -p 2"],
        "--standin-* calls are not logged"
    );
}

#[test]
fn without_its_state_it_says_so_and_exits_1_as_uhubctl_errors_do() {
    let hubs = Hubs::new(&via_hub(pixel()));
    let mut c = hubs.command(&["-l", "1-1"]);
    c.env_remove("UHUBCTL_STATE");
    let missing = run(c);
    assert_eq!(missing.code, Some(1));
    assert!(
        missing.stderr.contains("UHUBCTL_STATE is not set") && missing.stderr.lines().count() == 1,
        "{}",
        missing.stderr
    );
    let mut v = hubs.command(&["-v"]);
    v.env_remove("UHUBCTL_STATE");
    assert_eq!(run(v).stdout, "2.6.0\n", "options are read before any hub");

    std::fs::write(&hubs.state, r#"{ "hubs": [ { "location": "1-1" } ] }"#).unwrap();
    let bad = run(hubs.command(&[]));
    assert_eq!(bad.code, Some(1));
    assert!(
        bad.stderr.contains(&hubs.state.display().to_string()) && bad.stderr.contains("missing field"),
        "{}",
        bad.stderr
    );

    std::fs::write(&hubs.state, r#"{ "hubs": [] }"#).unwrap();
    let none = run(hubs.command(&["-l", "1-1", "-a", "off"]));
    assert_eq!(
        (none.code, none.stderr.as_str()),
        (Some(1), "No compatible devices detected at location 1-1!\nRun with -h to get usage info.\n")
    );
}

#[test]
fn parallel_runs_lose_no_update() {
    // Each run sleeps between reading the state and writing it (-r 3 -w 50 at full time):
    // without the lock, most of these switches would be lost.
    let ports: Vec<Value> = (0..8).map(|_| json!({})).collect();
    let hubs = Hubs::new(&json!({ "hubs": [
        { "location": "3-1", "id": "0bda:5411", "vendor": "Generic", "product": "8-Port USB 2.0 Hub",
          "usb": "2.10", "switching": "ppps", "ports": ports }
    ]}));
    let children: Vec<_> = (1..=8)
        .map(|p| {
            let mut c = hubs.command(&["-l", "3-1", "-p", &p.to_string(), "-a", "off", "-r", "3", "-w", "50"]);
            c.env("UHUBCTL_TIME_SCALE", "1").stdout(std::process::Stdio::null());
            c.spawn().unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let off: Vec<usize> = (1..=8).filter(|&p| !hubs.powered("3-1", p)).collect();
    assert_eq!(off, (1..=8).collect::<Vec<_>>());
    assert_eq!(hubs.calls().len(), 8);
}

#[test]
fn hooks_tell_a_phone_when_its_charger_and_its_bus_go_and_come_back() {
    let hubs = Hubs::new(&json!({}));
    let events = hubs.dir.path().join("events");
    let hook = |what: &str| json!(["sh", "-c", format!("echo {what} \"$1\" >> {}", events.display()), "hook"]);
    let mut phone = pixel();
    phone["on_vbus"] = hook("vbus");
    phone["on_bus"] = hook("bus");
    let mut state = via_hub(phone);
    state["hubs"][0]["ports"][2] = json!({ "vbus_stays": true, "device": {
        "id": "18d1:4ee8", "serial": "KEEPS", "on_vbus": hook("keeps-vbus"), "on_bus": hook("keeps-bus") } });
    std::fs::write(&hubs.state, state.to_string()).unwrap();
    let seen = || std::fs::read_to_string(&events).unwrap_or_default().lines().map(String::from).collect::<Vec<_>>();

    assert_eq!(run(hubs.command(&["-l", "1-1", "-p", "2", "-a", "off"])).code, Some(0));
    assert_eq!(seen(), ["bus detached", "vbus none"]);
    run(hubs.command(&["-l", "1-1", "-p", "2", "-a", "on"]));
    assert_eq!(seen()[2..], ["vbus usb", "bus attached"]);
    run(hubs.command(&["-l", "1-1", "-p", "3", "-a", "off"]));
    assert_eq!(seen()[4..], ["keeps-bus detached"], "VBUS stays: still charging");
    assert_eq!(run(hubs.command(&["--standin-vbus", "1-1", "3"])).stdout, "on\n");

    // Pulling the cable is a cut too; plugging another device in shows it.
    assert_eq!(run(hubs.command(&["--standin-plug", "1-1", "2", "none"])).code, Some(0));
    assert_eq!(seen()[5..], ["bus detached", "vbus none"]);
    let plug =
        run(hubs.command(&["--standin-plug", "1-1", "2", "04e8:6860", "SAMSUNG", "SAMSUNG_Android", "R58M12ABCDE"]));
    assert_eq!((plug.code, plug.stderr.as_str()), (Some(0), ""));
    let listing = run(hubs.command(&["-l", "1-1", "-p", "2"]));
    assert_eq!(
        block(&listing.stdout, "Current", "1-1"),
        ["  Port 2: 0503 power highspeed enable connect [04e8:6860 SAMSUNG SAMSUNG_Android R58M12ABCDE]"]
    );
    let refused = run(hubs.command(&["--standin-plug", "1-1", "9", "none"]));
    assert_eq!(
        (refused.code, refused.stderr.as_str()),
        (Some(1), "uhubctl stand-in: hub 1-1 has ports 1 to 4, not \"9\"\n")
    );
}

#[test]
fn a_test_edit_under_the_lock_is_seen_by_the_next_run() {
    let hubs = Hubs::new(&via_hub(json!(null)));
    hubs.edit(|s| s["hubs"][0]["ports"][1]["device"] = pixel());
    let listing = run(hubs.command(&["-s", PIXEL, "-a", "off"]));
    assert_eq!(listing.code, Some(0), "{}", listing.stderr);
    assert_eq!(block(&listing.stdout, "New", "1-1"), ["  Port 2: 0000 off"], "-s picks the phone's port only");
    assert!(hubs.powered("1-1", 1) && !hubs.powered("1-1", 2));
}

#[test_needs::needs(sshd)]
#[tokio::test]
async fn on_the_ssh_host_it_runs_in_the_session_with_the_state_sshd_gives_it() {
    use lab::transport::{CommandSpec, SshTransport, Transport};
    let hubs = Hubs::new(&via_hub(pixel()));
    let s = sshd::start_with(&hubs.sshd_env());
    let t = SshTransport::new(s.ssh_config(s.known_hosts()));
    let out = t.exec(&CommandSpec::new("uhubctl", &["-l", "1-1", "-p", "2", "-a", "off"])).await.unwrap();
    assert!(out.success(), "{}", out.stderr_text());
    assert_eq!(block(&out.stdout_text(), "New", "1-1"), ["  Port 2: 0000 off"]);
    assert!(!hubs.powered("1-1", 2));
    let calls = hubs.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].0, "-l 1-1 -p 2 -a off");
    assert!(calls[0].1.as_deref().is_some_and(|c| c.starts_with("127.0.0.1 ")), "ran in an SSH session: {calls:?}");
}

#[test]
fn the_labs_parser_reads_what_the_stand_in_prints() {
    // A root hub, the VIA hub's USB2 half below its port 1 (the USB3 half on bus 2), and a
    // ganged hub beside it.
    let mut state = via_hub(pixel());
    let root = json!({ "location": "1", "id": "1d6b:0002", "vendor": "Linux 6.1.0 xhci-hcd",
        "product": "xHCI Host Controller", "serial": "0000:00:14.0", "usb": "2.00", "switching": "ppps",
        "ports": [{}, { "device": { "id": "046d:c52b", "vendor": "Logitech", "product": "USB Receiver", "speed": "full" } }] });
    let ganged = json!({ "location": "3-4", "id": "1a40:0101", "product": "USB 2.0 Hub", "usb": "2.00",
        "switching": "ganged", "ports": [{}, {}, {}, {}] });
    state["hubs"].as_array_mut().unwrap().splice(0..0, [root, ganged]);
    let hubs = Hubs::new(&state);

    let listing = parse(&run(hubs.command(&[])).stdout).unwrap();
    let seen: Vec<(&str, usize, Block)> =
        listing.hubs.iter().map(|h| (h.location.as_str(), h.ports.len(), h.block)).collect();
    assert_eq!(
        seen,
        [("1", 2, Block::Current), ("1-1", 4, Block::Current), ("2-1", 4, Block::Current)],
        "ganged only with -f"
    );
    assert!(listing.hubs.iter().all(|h| h.ports.iter().all(|p| p.powered)));
    let below = listing.hubs[0].port(1).unwrap().device.as_ref().unwrap();
    assert_eq!((below.vid_pid.as_str(), below.ports, below.switching), ("2109:2822", Some(4), Some(Switching::Ppps)));
    let found: Vec<(&str, u32)> =
        listing.find_serial(PIXEL).iter().map(|(h, p)| (h.location.as_str(), p.number)).collect();
    assert_eq!(found, [("1-1", 2)]);
    assert!(listing.find_serial("USB Receiver").is_empty() && listing.find_serial("Receiver").len() == 1);

    let off = parse(&run(hubs.command(&["-l", "1-1", "-p", "2", "-a", "off"])).stdout).unwrap();
    let (new, twin) = (off.latest("1-1").unwrap(), off.latest("2-1").unwrap());
    assert_eq!((new.block, twin.block), (Block::New, Block::New));
    let p = new.port(2).unwrap();
    assert_eq!((p.powered, p.connected, p.status), (false, false, 0x0000));
    assert!(!twin.port(2).unwrap().powered);

    let on = parse(&run(hubs.command(&["-l", "1-1", "-p", "2", "-a", "on"])).stdout).unwrap();
    let p = on.latest("1-1").unwrap().port(2).unwrap();
    assert_eq!((p.powered, p.connected, p.device.is_none()), (true, true, true), "`connect []`: not described yet");
    let cycle = parse(&run(hubs.command(&["-l", "1-1", "-p", "2", "-a", "cycle", "-R"])).stdout).unwrap();
    let p = cycle.latest("1-1").unwrap().port(2).unwrap();
    let stale = p.device.as_ref().unwrap();
    assert_eq!((p.powered, stale.vid_pid.as_str(), stale.name.as_str()), (true, "18d1:4ee7", ""));
    assert!(!stale.has_serial(PIXEL), "a stale entry has no serial: the lab must not take it for the phone");

    let all_off = parse(&run(hubs.command(&["-f", "-l", "3-4", "-p", "3", "-a", "0"])).stdout).unwrap();
    let g = all_off.latest("3-4").unwrap();
    assert_eq!(
        (g.block, g.device.switching, g.device.name.as_str()),
        (Block::New, Some(Switching::Ganged), "USB 2.0 Hub")
    );
    assert_eq!(g.ports.len(), 1, "-p 3: the port asked about");
    assert!(!hubs.powered("3-4", 1) && !hubs.powered("3-4", 4), "the whole gang went off");
}

#[test]
fn a_campaign_untethers_a_simulated_phone_through_the_stand_in_and_leaves_its_port_on() {
    // The lab's own uhubctl tether on the stand-in: off before each soak, read back from
    // the New status, on after it (tests/integration/hub_untether.rs: the whole path, also over SSH).
    let (lab, runbook) = hub_campaign();
    let hubs = Hubs::new(&via_hub(pixel()));
    let out = lab.cmd(&["run", runbook.to_str().unwrap()]).envs(hubs.env()).output().unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [2]);
    let calls: Vec<String> = hubs.calls().into_iter().map(|(args, _)| args).collect();
    // The phone (no USB serial in the lab: whatever the port has) seen, cut, gone, on, back.
    let attempt = ["-l 1-1 -p 2", "-l 1-1 -p 2 -a off", "-l 1-1 -p 2", "-l 1-1 -p 2 -a on", "-l 1-1 -p 2"];
    assert_eq!(calls, [attempt, attempt].concat());
    assert!(hubs.powered("1-1", 2) && hubs.powered("2-1", 2), "both halves on again");
}

#[test]
fn a_port_the_stand_in_keeps_powered_stops_the_campaign_from_soaking_on_it() {
    let (lab, runbook) = hub_campaign();
    let mut state = via_hub(pixel());
    state["hubs"][0]["ports"][1]["off_needs_repeat"] = json!(10);
    let hubs = Hubs::new(&state);
    let out = lab.cmd(&["run", runbook.to_str().unwrap()]).envs(hubs.env()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [0], "{stdout}");
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts");
    assert!(
        !reasons.is_empty() && reasons.iter().all(|r| r.contains("still has power after `uhubctl -a off`")),
        "{reasons:?}"
    );
}

#[test]
fn a_port_that_needs_repeated_off_requests_is_cut_with_repeat() {
    let (lab, runbook) = hub_campaign_with(", repeat = 10");
    let mut state = via_hub(pixel());
    state["hubs"][0]["ports"][1]["off_needs_repeat"] = json!(10);
    let hubs = Hubs::new(&state);
    let out = lab.cmd(&["run", runbook.to_str().unwrap()]).envs(hubs.env()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [2], "{stdout}");
    let offs: Vec<String> = hubs.calls().into_iter().map(|(args, _)| args).filter(|c| c.contains("-a off")).collect();
    assert!(offs.len() == 2 && offs.iter().all(|c| c.ends_with("-r 10")), "{offs:?}");
}

/// A lab with a USB-only simulated phone on port 2 of hub 1-1, and a two-trial runbook.
fn hub_campaign() -> (TempLab, std::path::PathBuf) {
    hub_campaign_with("")
}

/// `hub_campaign` with `extra` keys in the tether's uhubctl table (`repeat = 10`).
fn hub_campaign_with(extra: &str) -> (TempLab, std::path::PathBuf) {
    let lab = TempLab::from_text(&format!(
        "[lab]\nname = \"hub\"\n\n[[device]]\nname = \"pixel\"\nplatform = \"sim\"\nmodel = \"Pixel 7\"\n\
         tether = {{ uhubctl = {{ location = \"1-1\", port = 2{extra} }} }}\n[device.sim]\nemulates = \"android\"\nusb_only = true\n",
    ));
    let runbook = pixel_runbook(&lab);
    (lab, runbook)
}
