//! A shared lab through the real binary: two `lab run`s on the default lab's `this-host`
//! take turns (the apps' own logs of their runs never overlap), `--no-wait` names the
//! holder, `lab status` shows the holder and the queue, Ctrl-C while queued leaves
//! nothing behind, and SIGKILL of the holder lets the waiter start at once.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{TempLab, executable};

/// An app that writes `TAG start|end MICROSECONDS PID` lines to the log it is given, from
/// its start until it is stopped (bash's own clock: no process to start, and so none that
/// the stop's signal could reach first).
pub(crate) const SOAKER: &str = r#"#!/bin/bash
echo "$2 start ${EPOCHREALTIME/./} $$" >> "$1"
trap 'echo "$2 end ${EPOCHREALTIME/./} $$" >> "$1"; exit 0' TERM INT
while :; do sleep 0.05; done
"#;

/// A runbook `name` of `repeats` trials of `duration` on `this-host`, its app logging to
/// `soaks.log` with tag `name`.
pub(crate) fn runbook(lab: &TempLab, name: &str, duration: &str, repeats: u32) -> PathBuf {
    runbook_logging_to(lab, name, duration, repeats, &lab.dir.path().join("soaks.log"))
}

/// [`runbook`], its app logging to `log`.
pub(crate) fn runbook_logging_to(lab: &TempLab, name: &str, duration: &str, repeats: u32, log: &Path) -> PathBuf {
    let dir = lab.dir.path();
    let app = dir.join("soaker.sh");
    if !app.exists() {
        executable(&app, SOAKER);
    }
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\nduration = \"{duration}\"\nrepeats = {repeats}\nretries = 0\ndevices = [\"this-host\"]\n\
             [builds.only]\nbaseline = true\n[builds.only.host]\ncommand = [\"{}\", \"{}\", \"{name}\"]\n",
            app.display(),
            log.display()
        ),
    )
    .unwrap();
    path
}

pub(crate) fn spawn(lab: &TempLab, args: &[&str]) -> Child {
    lab.process(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

pub(crate) fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < until, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Campaign of the holder of `this-host`, if any.
fn holder(lab: &TempLab) -> Option<String> {
    lab.try_sql::<String>("SELECT COALESCE(campaign, purpose) FROM device_leases WHERE device = 'this-host'")
        .ok()
        .and_then(|v| v.into_iter().next())
}

fn queued(lab: &TempLab) -> usize {
    lab.try_sql::<String>("SELECT campaign FROM device_queue").map(|v| v.len()).unwrap_or(0)
}

pub(crate) fn finish(child: Child) -> (i32, String) {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// (tag, start, end, pid) of each run of the app, in start order.
pub(crate) fn runs(log: &Path) -> Vec<(String, u128, Option<u128>, i32)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut out: Vec<(String, u128, Option<u128>, i32)> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (tag, what, t, pid) = (f[0], f[1], f[2].parse().unwrap(), f[3].parse().unwrap());
        match what {
            "start" => out.push((tag.to_string(), t, None, pid)),
            _ => out.iter_mut().find(|r| r.3 == pid).unwrap().2 = Some(t),
        }
    }
    out.sort_by_key(|r| r.1);
    out
}

#[test]
fn two_runs_on_one_host_device_take_turns_and_no_wait_names_the_holder() {
    let lab = TempLab::new();
    let a = runbook(&lab, "turn-a", "2s", 2);
    let b = runbook(&lab, "turn-b", "1s", 2);
    let first = spawn(&lab, &["run", a.to_str().unwrap()]);
    wait_until("the first run holds this-host", || holder(&lab).is_some_and(|c| c.starts_with("turn-a-")));

    let out = lab.cmd(&["run", b.to_str().unwrap(), "--no-wait"]).timeout(Duration::from_secs(60)).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let held_by = format!("this-host is held by campaign {} (runbook turn-a) on ", holder(&lab).unwrap());
    assert!(stderr.contains(&held_by), "{stderr}");
    assert!(stderr.contains(&format!("(pid {}) since 20", first.id())), "{stderr}");
    assert!(stderr.contains("fix: run it without --no-wait"), "{stderr}");
    assert_eq!(lab.campaigns().len(), 1, "--no-wait created a campaign");
    assert_eq!(queued(&lab), 0, "--no-wait left a place in the queue");

    let second = spawn(&lab, &["run", b.to_str().unwrap()]);
    wait_until("the second run waits in the queue", || queued(&lab) == 1);
    let status = lab.cmd(&["status", "--json"]).output().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let queues = status["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 2, "{queues:?}");
    assert_eq!((queues[0]["device"].as_str(), queues[0]["place"].as_str()), (Some("this-host"), Some("holds")));
    assert!(queues[0]["who"].as_str().unwrap().starts_with("campaign turn-a-"), "{queues:?}");
    assert!(queues[0]["expected"].as_str().unwrap().starts_with("done by 20"), "{queues:?}");
    assert_eq!(queues[1]["place"], "1");
    assert!(queues[1]["who"].as_str().unwrap().ends_with("(runbook turn-b)"), "{queues:?}");
    assert_eq!(
        queues[1]["machine"],
        format!("{} ({})", queues[0]["machine"].as_str().unwrap().split(' ').next().unwrap(), second.id())
    );
    assert!(queues[1]["expected"].as_str().unwrap().starts_with("starts 20"), "{queues:?}");
    let text = String::from_utf8(lab.cmd(&["status"]).output().unwrap().stdout).unwrap();
    assert!(text.contains("devices held and waited for"), "{text}");

    let (code_a, out_a) = finish(first);
    let (code_b, out_b) = finish(second);
    assert_eq!((code_a, code_b), (0, 0), "{out_a}\n{out_b}");
    assert!(
        out_b.contains("[this-host] waiting its turn (number 1 in its queue): held by campaign turn-a-"),
        "{out_b}"
    );
    assert!(out_b.contains("[this-host] its turn came after "), "{out_b}");
    let valid: Vec<i64> = lab.sql("SELECT count(*) FROM attempts WHERE status = 'valid' GROUP BY campaign");
    assert_eq!(valid, [2, 2]);

    let runs = runs(&lab.dir.path().join("soaks.log"));
    assert_eq!(runs.len(), 4, "{runs:?}");
    for w in runs.windows(2) {
        let end = w[0].2.expect("an app run without its end");
        assert!(end <= w[1].1, "two apps ran at once on this-host: {runs:?}");
    }
    let tags: Vec<&str> = runs.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(tags, ["turn-a", "turn-a", "turn-b", "turn-b"]);
    assert!(lab.sql::<String>("SELECT device FROM device_leases").is_empty(), "a lease left behind");
    assert_eq!(queued(&lab), 0);
}

#[test]
fn ctrl_c_while_queued_leaves_nothing_and_a_killed_holder_frees_the_device_at_once() {
    let lab = TempLab::new();
    let a = runbook(&lab, "long-a", "60s", 1);
    let b = runbook(&lab, "short-b", "1s", 1);
    let mut first = spawn(&lab, &["run", a.to_str().unwrap()]);
    wait_until("the first run holds this-host", || holder(&lab).is_some());

    let queued_one = spawn(&lab, &["run", b.to_str().unwrap()]);
    wait_until("the second run waits", || queued(&lab) == 1);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(queued_one.id() as i32), nix::sys::signal::Signal::SIGINT)
        .unwrap();
    let (code, out) = finish(queued_one);
    assert_eq!(code, 130, "{out}");
    assert!(out.contains("did not start, nothing was recorded"), "{out}");
    assert_eq!(queued(&lab), 0, "a place left in the queue");
    assert_eq!(lab.campaigns().len(), 1, "a campaign left behind");

    let waiter = spawn(&lab, &["run", b.to_str().unwrap()]);
    wait_until("the third run waits", || queued(&lab) == 1);
    first.kill().unwrap(); // SIGKILL: the holder releases nothing itself
    let killed = Instant::now();
    first.wait().unwrap();
    wait_until("the waiter holds this-host", || holder(&lab).is_some_and(|c| c.starts_with("short-b-")));
    let after = killed.elapsed();
    // The killed run's app is an orphan now: stop it (a real lab's next trial would find it).
    for r in runs(&lab.dir.path().join("soaks.log")).iter().filter(|r| r.0 == "long-a") {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(r.3), nix::sys::signal::Signal::SIGKILL);
    }
    assert!(after < Duration::from_secs(5), "the waiter started {after:?} after the holder died");
    let (code, out) = finish(waiter);
    assert_eq!(code, 0, "{out}");
}

/// One of the quickstart's phones is held: the campaign starts on the other three at once,
/// and the held one's trials run once it is let go.
#[test]
fn a_campaign_starts_on_the_free_devices_while_a_held_one_is_waited_for() {
    let lab = TempLab::new();
    let req = lab::store::LeaseRequest { purpose: "care".into(), host: "shelf-1".into(), ..Default::default() };
    let held = lab.hold("sim-pixel-2", &req);
    let run = spawn(&lab, &["run", "runbooks/quickstart.toml"]);
    let on = |device: &str| {
        lab.try_sql::<i64>(&format!(
            "SELECT count(*) FROM attempts a JOIN trials t ON t.campaign = a.campaign AND t.idx = a.trial_idx
             WHERE t.device = '{device}'"
        ))
        .ok()
        .and_then(|v| v.first().copied())
        .unwrap_or(0)
    };
    // The other phones finish their trials (4 each) while sim-pixel-2 is held.
    wait_until("the free phones ran their trials", || {
        ["sim-iphone-1", "sim-iphone-2", "sim-pixel-1"].iter().all(|d| on(d) == 4)
    });
    assert_eq!(on("sim-pixel-2"), 0, "a held phone was used");
    drop(held);
    let (code, out) = finish(run);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("[sim-pixel-2] waiting its turn (number 1 in its queue): held by `lab care` on shelf-1"),
        "{out}"
    );
    assert_eq!(on("sim-pixel-2"), 4);
}
