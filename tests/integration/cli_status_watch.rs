//! `lab status --watch` through the real binary: a drawing at once, another only after the
//! store changes and at most one a second, none while nothing changes, and a clean exit 0 on
//! Ctrl-C and when the reader of its stdout goes away.

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{TempLab, root};
use lab::store::{DeviceStatusRow, Store};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A running `lab status --watch`; killed when dropped, so a failing test leaves none behind.
struct Watch(Child);

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Watch {
    fn signal(&self, sig: Signal) {
        kill(Pid::from_raw(self.0.id() as i32), sig).unwrap();
    }

    /// Waits up to `within` for it to end; its exit code, or `None` if it still runs.
    fn exit_within(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.0.try_wait().unwrap() {
                return Some(status.code().expect("ended by a signal, not by itself"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    fn stderr(&mut self) -> String {
        let mut err = String::new();
        self.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        err
    }
}

/// Starts `lab status --watch ARGS` on `lab`, stdout piped.
fn spawn_watch(lab: &TempLab, args: &[&str]) -> Watch {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_lab"))
        .current_dir(root())
        .arg("--lab")
        .arg(&lab.lab)
        .args(["status", "--watch"])
        .args(args)
        .env_remove("LAB_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Watch(child)
}

/// The watcher's stdout lines, read on a thread so the test can wait with a deadline.
fn lines_of(stdout: ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next JSON Lines object, if one comes within `within`; every line must be one object.
fn next_json(lines: &mpsc::Receiver<String>, within: Duration) -> Option<serde_json::Value> {
    let line = lines.recv_timeout(within).ok()?;
    let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    assert!(v.is_object(), "{line}");
    Some(v)
}

fn battery_of(status: &serde_json::Value, device: &str) -> String {
    let devices = status["devices"].as_array().unwrap();
    let d = devices.iter().find(|d| d["device"] == device).unwrap_or_else(|| panic!("no {device} in {status}"));
    d["battery"].as_str().unwrap().to_string()
}

fn battery_row(pct: f64) -> DeviceStatusRow {
    DeviceStatusRow {
        device: "sim-iphone-1".into(),
        state: "idle".into(),
        battery_pct: Some(pct),
        campaign: None,
        trial_key: None,
        phase: None,
        updated_at: chrono::Utc::now().to_rfc3339(),
    }
}

#[test]
fn data_version_moves_for_other_connections_commits_only() {
    let lab = TempLab::new();
    let (watcher, writer) = (Store::open(&lab.store()).unwrap(), Store::open(&lab.store()).unwrap());
    let v0 = watcher.data_version().unwrap();
    watcher.set_device_status(&battery_row(50.0)).unwrap();
    assert_eq!(watcher.data_version().unwrap(), v0, "its own commit leaves it");
    writer.set_device_status(&battery_row(49.0)).unwrap();
    let v1 = watcher.data_version().unwrap();
    assert_ne!(v1, v0, "another connection's commit moves it");
    assert_eq!(watcher.data_version().unwrap(), v1, "and it stays until the next one");
}

#[test]
fn json_watch_draws_at_once_then_once_per_change_and_ends_on_ctrl_c() {
    let lab = TempLab::new();
    let writer = Store::open(&lab.store()).unwrap();
    let mut watch = spawn_watch(&lab, &["--json"]);
    let lines = lines_of(watch.0.stdout.take().unwrap());
    let first = next_json(&lines, Duration::from_secs(5)).expect("the first status comes at once");
    assert_eq!(battery_of(&first, "sim-iphone-1"), "-");
    assert_eq!(first["devices"].as_array().unwrap().len(), 5, "{first}");
    assert!(next_json(&lines, Duration::from_millis(2500)).is_none(), "nothing changed: nothing drawn");

    // Five commits within half a second: drawn at most once a second, the last one shown.
    let started = Instant::now();
    for pct in [80.0, 79.0, 78.0, 77.0, 76.0] {
        writer.set_device_status(&battery_row(pct)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut seen = Vec::new();
    while let Some(v) = next_json(&lines, Duration::from_millis(2500)) {
        seen.push((started.elapsed(), battery_of(&v, "sim-iphone-1")));
    }
    assert!(!seen.is_empty(), "the change was drawn");
    assert!(seen.len() <= 2, "at most one drawing a second over ~1 s of commits: {seen:?}");
    assert_eq!(seen.last().unwrap().1, "76 %", "{seen:?}");
    if let [(a, _), (b, _)] = seen[..] {
        assert!(b - a >= Duration::from_millis(900), "two drawings less than a second apart: {seen:?}");
    }

    watch.signal(Signal::SIGINT);
    assert_eq!(watch.exit_within(Duration::from_secs(3)), Some(0), "Ctrl-C ends it with exit 0");
    assert_eq!(watch.stderr(), "");
}

#[test]
fn watch_ends_with_exit_0_when_its_reader_goes_away() {
    let lab = TempLab::new();
    let mut watch = spawn_watch(&lab, &["--json"]);
    let mut stdout = BufReader::new(watch.0.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["campaigns"], serde_json::json!([]), "a lab that never ran: no store, no campaigns");
    drop(stdout); // closes the pipe's read end, with nothing left to draw
    assert_eq!(watch.exit_within(Duration::from_secs(3)), Some(0), "a closed pipe ends it with exit 0");
    assert_eq!(watch.stderr(), "", "a closed pipe is no error");
}

#[test]
fn piped_text_watch_prints_the_status_then_a_blank_line_and_no_terminal_codes() {
    let lab = TempLab::new();
    let mut watch = spawn_watch(&lab, &[]);
    let mut stdout = watch.0.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).unwrap();
        text
    });
    std::thread::sleep(Duration::from_millis(1500));
    watch.signal(Signal::SIGINT);
    assert_eq!(watch.exit_within(Duration::from_secs(3)), Some(0));
    let text = reader.join().unwrap();
    assert!(text.starts_with("lab "), "{text}");
    assert!(text.ends_with("\n\n"), "each status ends with a blank line: {text:?}");
    assert_eq!(text.matches("\ndevices:\n").count(), 1, "drawn once: nothing changed\n{text}");
    assert!(!text.contains('\x1b'), "no clear-screen codes when stdout is not a terminal");
}

#[test]
fn watch_follows_a_campaign_from_a_lab_without_a_store_to_done() {
    let lab = TempLab::new();
    let mut watch = spawn_watch(&lab, &["--json"]);
    let lines = lines_of(watch.0.stdout.take().unwrap());
    let first = next_json(&lines, Duration::from_secs(5)).expect("the first status comes at once");
    assert_eq!(first["campaigns"], serde_json::json!([]));
    lab.cmd(&["run", "runbooks/quickstart.toml"]).assert().success();
    let id = lab.campaigns()[0].clone();
    let mut last = first;
    while let Some(v) = next_json(&lines, Duration::from_millis(2500)) {
        last = v;
    }
    assert_eq!(last["campaigns"][0]["campaign"], id.as_str(), "{last}");
    assert_eq!(last["campaigns"][0]["status"], "done", "{last}");
    assert_eq!(last["campaigns"][0]["progress"], "16/16", "{last}");
    watch.signal(Signal::SIGTERM);
    assert_eq!(watch.exit_within(Duration::from_secs(3)), Some(0), "SIGTERM ends it with exit 0");
}
