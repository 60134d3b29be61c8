//! `lab schedule` through the binary, on the default simulated devices: list, run-due
//! (once per slot, missed slots skipped and named, two racing runners), the daemon killed
//! and restarted during a slot, SIGTERM, and the units `install` prints.
//!
//! "Now" is pinned with `LAB_NOW` (test-only): slots are due relative to it, while the
//! campaigns themselves run on the simulators' virtual clocks.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{TempLab, root};

/// Sundays 02:30 in Berlin: 2026-03-29 is the spring-forward day (slot at 01:00Z).
const WEEKLY: &str =
    "\n[[schedule]]\nname = \"weekly\"\ncron = \"30 2 * * 0\"\ntimezone = \"Europe/Berlin\"\nrunbook = \"tiny.toml\"\n";
const BEFORE: &str = "2026-03-28T12:00:00Z";
const SLOT: &str = "2026-03-29T01:00:00Z";
const AFTER_SLOT: &str = "2026-03-29T01:05:00Z";

/// A runbook of `repeats` per build on the four simulated phones.
fn runbook(repeats: u32) -> String {
    format!(
        "name = \"tiny\"\nduration = \"1m\"\nrepeats = {repeats}\nseed = 3\ndevices = [\"tag:phone\"]\n\
         [builds.a]\nbaseline = true\n[builds.a.sim]\ncpu_pct = 5\nwakeups_per_s = 5\nmemory_mb = 10\n\
         [builds.b]\n[builds.b.sim]\ncpu_pct = 8\nwakeups_per_s = 5\nmemory_mb = 10\n\
         [workload]\nrequest_interval = \"1s\"\n[preconditions]\nbattery_min = 20\n"
    )
}

fn scheduled_lab(schedules: &str, repeats: u32) -> TempLab {
    let text = std::fs::read_to_string(root().join("lab.toml")).unwrap() + schedules;
    let lab = TempLab::from_text(&text);
    std::fs::write(lab.dir.path().join("tiny.toml"), runbook(repeats)).unwrap();
    lab
}

fn at(lab: &TempLab, now: &str, args: &[&str]) -> assert_cmd::Command {
    let mut c = lab.cmd(args);
    c.env("LAB_NOW", now);
    c
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// (due_utc, state, outcome or reason) of every slot.
fn slots(lab: &TempLab) -> Vec<String> {
    lab.sql(
        "SELECT due_utc || ' ' || state || ' ' || COALESCE(outcome, skipped_because, '') FROM schedule_slots
         ORDER BY due_utc",
    )
}

#[test]
fn schedule_list_json_shows_next_due_times_in_the_zone_and_utc() {
    let daily = "\n[[schedule]]\nname = \"weekdays\"\ncron = \"0 6 * * 1-5\"\ntimezone = \"America/New_York\"\nrunbook = \"tiny.toml\"\n";
    let lab = scheduled_lab(&format!("{WEEKLY}{daily}"), 1);
    let out = at(&lab, BEFORE, &["schedule", "list", "--json"]).assert().success().get_output().clone();
    let text = stdout(&out).replace(&lab.dir.path().display().to_string(), "[LAB]");
    insta::assert_snapshot!(text);
    // After the spring-forward slot ran, the last slot and the next one (back at 02:30).
    at(&lab, BEFORE, &["schedule", "run-due"]).assert().success();
    at(&lab, AFTER_SLOT, &["schedule", "run-due"]).assert().success();
    let out = at(&lab, AFTER_SLOT, &["schedule", "list", "--json"]).assert().success().get_output().clone();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = &v["schedules"][0];
    assert_eq!(w["last_slot"]["due_utc"], SLOT, "{v}");
    assert_eq!(w["last_slot"]["due_local"], "2026-03-29T03:00:00+02:00", "{v}");
    assert_eq!((&w["last_slot"]["state"], &w["last_slot"]["outcome"]), (&"finished".into(), &"ok".into()), "{v}");
    assert_eq!(w["next_due"]["local"], "2026-04-05T02:30:00+02:00", "{v}");
    assert_eq!(w["next_due"]["utc"], "2026-04-05T00:30:00Z", "{v}");
}

#[test]
fn run_due_runs_a_due_slot_once_and_then_nothing() {
    let lab = scheduled_lab(WEEKLY, 1);
    // First sight, the day before: nothing due yet.
    let out = at(&lab, BEFORE, &["schedule", "run-due"]).assert().success().get_output().clone();
    assert!(stdout(&out).contains("nothing due"), "{}", stdout(&out));
    assert!(stdout(&out).contains("next due 2026-03-29 03:00 CEST (2026-03-29T01:00:00Z)"), "{}", stdout(&out));
    let out = at(&lab, AFTER_SLOT, &["schedule", "run-due"]).assert().success().get_output().clone();
    let text = stdout(&out);
    assert!(text.contains("weekly slot 2026-03-29 03:00 CEST (2026-03-29T01:00:00Z): ran campaign tiny-"), "{text}");
    assert_eq!(lab.campaigns().len(), 1);
    let again = at(&lab, "2026-03-29T01:06:00Z", &["schedule", "run-due"]).assert().success().get_output().clone();
    assert!(stdout(&again).contains("nothing due"), "{}", stdout(&again));
    assert_eq!(lab.campaigns().len(), 1, "the slot ran once");
    assert_eq!(slots(&lab), [format!("{SLOT} finished ok")]);
    let linked: Vec<String> = lab.sql("SELECT campaign FROM schedule_slots");
    assert_eq!(linked, lab.campaigns(), "the slot names its campaign");
}

#[test]
fn missed_slots_run_the_latest_once_and_name_the_others() {
    let lab = scheduled_lab(WEEKLY, 1);
    at(&lab, "2026-03-01T00:00:00Z", &["schedule", "run-due"]).assert().success();
    // Off for three weeks and a half: 1, 8, 15 and 22 March were due.
    let out = at(&lab, "2026-03-25T09:00:00Z", &["schedule", "run-due"]).assert().success().get_output().clone();
    let text = stdout(&out);
    for skipped in ["2026-03-01T01:30:00Z", "2026-03-08T01:30:00Z", "2026-03-15T01:30:00Z"] {
        assert!(text.contains(&format!("({skipped}): skipped; missed")), "{skipped} named in:\n{text}");
    }
    assert!(text.contains("(2026-03-22T01:30:00Z): ran campaign"), "{text}");
    assert_eq!(lab.campaigns().len(), 1);
    let rows = slots(&lab);
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert!(rows[..3].iter().all(|r| r.contains(" skipped missed: at 2026-03-25T09:00:00Z")), "{rows:?}");
    assert_eq!(rows[3], "2026-03-22T01:30:00Z finished ok");
}

#[test]
fn each_slot_runs_with_its_own_seed_unless_the_schedule_keeps_the_runbooks() {
    let fixed = "seed = \"runbook\"\n";
    let lab = scheduled_lab(&format!("{WEEKLY}{}", WEEKLY.replace("\"weekly\"", "\"fixed\"") + fixed), 1);
    at(&lab, BEFORE, &["schedule", "run-due"]).assert().success();
    at(&lab, AFTER_SLOT, &["schedule", "run-due"]).assert().success();
    at(&lab, "2026-04-05T00:35:00Z", &["schedule", "run-due"]).assert().success();
    // Stored as SQLite's signed 64 bits.
    let seeds: Vec<String> = lab.sql(
        "SELECT s.schedule || ' ' || s.due_utc || ' ' || c.seed FROM schedule_slots s JOIN campaigns c ON c.id = s.campaign
         ORDER BY s.schedule, s.due_utc",
    );
    let slot = |due: &str| lab::schedule::slot_seed(3, "weekly", lab::schedule::parse_utc(due).unwrap()) as i64;
    assert_eq!(
        seeds,
        [
            format!("fixed {SLOT} 3"),
            "fixed 2026-04-05T00:30:00Z 3".to_string(),
            format!("weekly {SLOT} {}", slot(SLOT)),
            format!("weekly 2026-04-05T00:30:00Z {}", slot("2026-04-05T00:30:00Z")),
        ]
    );
    assert_ne!(slot(SLOT), slot("2026-04-05T00:30:00Z"));
    // Different seeds, different (simulated) measurements; the same seed, the same.
    let cpu = |schedule: &str| {
        lab.sql::<String>(&format!(
            "SELECT group_concat(v, ',') FROM (SELECT s.due_utc AS d, m.value AS v FROM measurements m
             JOIN schedule_slots s ON s.campaign = m.campaign WHERE m.metric = 'cpu_pct' AND s.schedule = '{schedule}'
             ORDER BY s.due_utc, m.trial_idx, m.attempt) GROUP BY d ORDER BY d"
        ))
    };
    let (weekly, fixed) = (cpu("weekly"), cpu("fixed"));
    assert_ne!(weekly[0], weekly[1]);
    assert_eq!(fixed[0], fixed[1]);
}

/// `lab schedule WHAT` at `now`, running on its own, stdout piped.
fn spawn_schedule(lab: &TempLab, now: &str, what: &str, stderr: Stdio) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("lab"))
        .current_dir(root())
        .args(["--lab", lab.lab.to_str().unwrap(), "schedule", what])
        .env("LAB_NOW", now)
        .env_remove("LAB_CONFIG")
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

#[test]
fn two_run_due_processes_started_together_run_the_slot_once() {
    // Long enough (3,200 trials, seconds) that the second runner comes while the first
    // one's campaign runs, however the two are scheduled on a loaded machine.
    let lab = scheduled_lab(WEEKLY, 400);
    at(&lab, BEFORE, &["schedule", "run-due"]).assert().success();
    let spawn = || spawn_schedule(&lab, AFTER_SLOT, "run-due", Stdio::piped());
    let (a, b) = (spawn(), spawn());
    let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    assert!(outs.iter().all(|o| o.status.success()), "{outs:?}");
    let texts: Vec<String> = outs.iter().map(stdout).collect();
    let ran = texts.iter().filter(|t| t.contains("): ran campaign")).count();
    // The other says it was claimed, or, when it came after the first had finished (a
    // loaded machine), that nothing was due: never that it ran too.
    let other =
        texts.iter().filter(|t| t.contains("): already claimed by process") || t.contains("nothing due")).count();
    assert_eq!((ran, other), (1, 1), "one runs, the other does not:\n{}", texts.join("\n----\n"));
    assert_eq!(lab.campaigns().len(), 1);
    assert_eq!(slots(&lab), [format!("{SLOT} finished ok")]);
}

#[test]
fn a_run_due_while_another_runner_has_the_slot_names_that_runner() {
    let lab = scheduled_lab(WEEKLY, 400);
    at(&lab, BEFORE, &["schedule", "run-due"]).assert().success();
    let first = spawn_schedule(&lab, AFTER_SLOT, "run-due", Stdio::piped());
    let pid = first.id();
    // Once the first runner's campaign has recorded trials, the slot is its own until it ends.
    let started = Instant::now();
    while lab.try_sql::<i64>("SELECT COUNT(*) FROM attempts").map_or(true, |n| n[0] == 0) {
        assert!(started.elapsed() < Duration::from_secs(60), "the first runner recorded no trial in 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = at(&lab, AFTER_SLOT, &["schedule", "run-due"]).assert().success().get_output().clone();
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success(), "{first:?}");
    assert!(stdout(&first).contains("): ran campaign"), "{}", stdout(&first));
    let text = stdout(&second);
    assert!(
        text.contains(&format!("): already claimed by process {pid} on ")) && !text.contains("nothing due"),
        "{text}"
    );
    assert_eq!(lab.campaigns().len(), 1);
    assert_eq!(slots(&lab), [format!("{SLOT} finished ok")]);
}

/// A `lab schedule daemon` whose stdout is collected line by line as it comes.
struct Daemon {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Daemon {
    fn start(lab: &TempLab, now: &str) -> Daemon {
        let mut child = spawn_schedule(lab, now, "daemon", Stdio::null());
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(l);
            }
        });
        Daemon { child, lines }
    }

    fn text(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits until a line contains `what`.
    fn wait_for(&mut self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !self.text().contains(what) {
            assert!(Instant::now() < deadline, "no `{what}` in:\n{}", self.text());
            assert!(self.child.try_wait().unwrap().is_none(), "the daemon ended:\n{}", self.text());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }
}

fn wait_for_attempts(lab: &TempLab, n: i64, daemon: &mut Daemon) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(v) = lab.try_sql::<i64>("SELECT COUNT(*) FROM attempts")
            && v.first().copied().unwrap_or(0) >= n
        {
            return;
        }
        assert!(Instant::now() < deadline, "no attempts recorded:\n{}", daemon.text());
        assert!(daemon.child.try_wait().unwrap().is_none(), "the daemon ended early:\n{}", daemon.text());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Every planned trial has exactly one valid attempt.
fn assert_each_trial_once(lab: &TempLab) {
    let planned: i64 = lab.sql::<i64>("SELECT COUNT(*) FROM trials")[0];
    let valid: Vec<i64> = lab.sql(
        "SELECT COUNT(a.attempt) FROM trials t LEFT JOIN attempts a
         ON a.campaign = t.campaign AND a.trial_idx = t.idx AND a.status = 'valid' GROUP BY t.campaign, t.idx",
    );
    assert_eq!(valid.len() as i64, planned);
    assert!(valid.iter().all(|n| *n == 1), "a trial ran twice or not at all: {valid:?}");
}

/// A daemon in the middle of the spring-forward slot's campaign (1,200 trials), with at
/// least `attempts` recorded.
fn daemon_in_a_slot(attempts: i64) -> (TempLab, Daemon) {
    let lab = scheduled_lab(WEEKLY, 150);
    at(&lab, BEFORE, &["schedule", "run-due"]).assert().success();
    let mut daemon = Daemon::start(&lab, AFTER_SLOT);
    wait_for_attempts(&lab, attempts, &mut daemon);
    (lab, daemon)
}

#[test]
fn the_daemon_killed_during_a_slot_resumes_it_when_restarted_and_never_runs_it_twice() {
    use nix::sys::signal::Signal;
    let (lab, mut first) = daemon_in_a_slot(100);
    first.signal(Signal::SIGKILL);
    first.child.wait().unwrap();
    let dead_pid = first.child.id();
    let before: Vec<String> = lab.sql("SELECT trial_idx || ':' || attempt || ':' || started_at FROM attempts");
    let run_before: Vec<String> = lab.sql("SELECT trial_idx || ':' || attempt FROM attempts");
    let planned: i64 = lab.sql::<i64>("SELECT COUNT(*) FROM trials")[0];
    assert!((before.len() as i64) < planned, "killed before the end ({} of {planned})", before.len());
    let claimed: Vec<String> = lab.sql("SELECT state || ' ' || claimed_pid FROM schedule_slots");
    assert_eq!(claimed, [format!("claimed {dead_pid}")]);

    let mut second = Daemon::start(&lab, AFTER_SLOT);
    second.wait_for("sleeping until weekly's next slot");
    let text = second.text();
    assert!(
        text.contains(&format!(
            "was claimed by process {dead_pid} on this machine, which is gone; resumed campaign tiny-"
        )),
        "{text}"
    );
    assert!(text.contains(": ok"), "{text}");
    assert!(!text.contains("): ran campaign"), "the slot was not started again:\n{text}");
    second.signal(Signal::SIGTERM);
    let status = second.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "SIGTERM while asleep is a clean stop");

    assert_eq!(lab.campaigns().len(), 1, "one campaign for the slot");
    assert_eq!(slots(&lab), [format!("{SLOT} finished ok")]);
    let after: Vec<String> = lab.sql("SELECT trial_idx || ':' || attempt || ':' || started_at FROM attempts");
    assert!(before.iter().all(|r| after.contains(r)), "what was recorded before the kill is kept");
    assert_each_trial_once(&lab);

    // The resumed trials ran with the slot's seed, not the runbook's: they measure what
    // the same slot run straight through measures.
    let straight = scheduled_lab(WEEKLY, 150);
    at(&straight, BEFORE, &["schedule", "run-due"]).assert().success();
    at(&straight, AFTER_SLOT, &["schedule", "run-due"]).assert().success();
    let values = |l: &TempLab| -> std::collections::BTreeMap<String, f64> {
        let rows: Vec<String> =
            l.sql("SELECT trial_idx || ':' || attempt || '=' || value FROM measurements WHERE metric = 'cpu_pct'");
        rows.iter().map(|r| r.split_once('=').unwrap()).map(|(k, v)| (k.to_string(), v.parse().unwrap())).collect()
    };
    let (resumed, reference) = (values(&lab), values(&straight));
    let compared: Vec<(&String, &f64)> = resumed.iter().filter(|(k, _)| !run_before.contains(k)).collect();
    assert!(compared.len() > 100, "{} trials ran after the restart", compared.len());
    for (k, v) in compared {
        assert_eq!(reference.get(k), Some(v), "trial:attempt {k} after the restart");
    }
}

#[test]
fn sigterm_during_a_slot_stops_the_daemon_cleanly_and_the_next_runner_resumes_the_slot() {
    use nix::sys::signal::Signal;
    let (lab, mut daemon) = daemon_in_a_slot(50);
    daemon.signal(Signal::SIGTERM);
    let status = daemon.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", daemon.text());
    // Give the reader thread the last lines.
    std::thread::sleep(Duration::from_millis(200));
    assert!(daemon.text().contains("): ran campaign tiny-"), "{}", daemon.text());
    assert!(daemon.text().contains(": interrupted"), "{}", daemon.text());
    let rows = slots(&lab);
    assert_eq!(rows, [format!("{SLOT} interrupted interrupted")]);

    let out = at(&lab, AFTER_SLOT, &["schedule", "run-due"]).assert().success().get_output().clone();
    let text = stdout(&out);
    assert!(text.contains("was interrupted; resumed campaign tiny-"), "{text}");
    assert_eq!(lab.campaigns().len(), 1);
    assert_eq!(slots(&lab), [format!("{SLOT} finished ok")]);
    assert_each_trial_once(&lab);
}

fn install(lab: &TempLab, how: &str) -> String {
    stdout(lab.cmd(&["schedule", "install", how, "--schedule", "weekly"]).assert().success().get_output())
}

#[test_needs::needs(systemd_analyze)]
#[test]
fn install_systemd_prints_units_that_systemd_analyze_verifies() {
    let lab = scheduled_lab(WEEKLY, 1);
    let text = install(&lab, "--systemd");
    let mut files = Vec::new();
    for part in text.split("\n# ==> ").skip(1) {
        let (name, body) = part.split_once(" <==\n").unwrap();
        let path = lab.dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        files.push(path);
    }
    let names: Vec<String> = files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["lab-weekly.timer", "lab-weekly.service"]);
    let timer = std::fs::read_to_string(&files[0]).unwrap();
    for line in [
        "OnCalendar=Sun *-*-* 02:30:00 Europe/Berlin",
        "OnCalendar=Sun *-*-* 03:00:00 Europe/Berlin",
        "Persistent=true",
        "Unit=lab-weekly.service",
    ] {
        assert!(timer.lines().any(|l| l == line), "{line} in\n{timer}");
    }
    let service = std::fs::read_to_string(&files[1]).unwrap();
    let bin = std::fs::canonicalize(assert_cmd::cargo::cargo_bin("lab")).unwrap();
    let lab_file = std::fs::canonicalize(&lab.lab).unwrap();
    let exec = format!("ExecStart={} --lab {} schedule run-due --schedule weekly", bin.display(), lab_file.display());
    assert!(service.lines().any(|l| l == exec), "{exec} in\n{service}");
    let wd = format!("WorkingDirectory={}", lab_file.parent().unwrap().display());
    assert!(service.lines().any(|l| l == wd), "{wd} in\n{service}");

    assert!(
        Command::new("systemd-analyze").arg("--version").output().is_ok(),
        "needs systemd-analyze: it is not installed (Debian: apt-get install systemd)"
    );
    let out = Command::new("systemd-analyze").arg("verify").args(&files).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "systemd-analyze verify said:\n{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn install_launchd_prints_a_plist_with_the_calendar_intervals() {
    let lab = scheduled_lab(WEEKLY, 1);
    let text = install(&lab, "--launchd");
    let v = plist::Value::from_reader_xml(text.as_bytes()).unwrap();
    let d = v.as_dictionary().unwrap();
    assert_eq!(d["Label"].as_string(), Some("dev.lab.schedule.weekly"));
    let args: Vec<&str> = d["ProgramArguments"].as_array().unwrap().iter().map(|a| a.as_string().unwrap()).collect();
    assert!(Path::new(args[0]).is_absolute() && Path::new(args[0]).exists(), "{args:?}");
    assert_eq!(
        args[1..],
        [
            "--lab",
            std::fs::canonicalize(&lab.lab).unwrap().to_str().unwrap(),
            "schedule",
            "run-due",
            "--schedule",
            "weekly"
        ]
    );
    assert!(Path::new(d["WorkingDirectory"].as_string().unwrap()).is_dir());
    let intervals: Vec<Vec<(String, i64)>> = d["StartCalendarInterval"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_dictionary().unwrap().iter().map(|(k, v)| (k.clone(), v.as_signed_integer().unwrap())).collect())
        .collect();
    let entry = |h, m| vec![("Weekday".to_string(), 0), ("Hour".to_string(), h), ("Minute".to_string(), m)];
    assert_eq!(intervals, [entry(2, 30), entry(3, 0)]);
    assert!(d["StandardOutPath"].as_string().unwrap().ends_with("schedule.log"));
}

#[test]
fn install_cron_prints_a_frequent_trigger() {
    let lab = scheduled_lab(WEEKLY, 1);
    let text = install(&lab, "--cron");
    let line = text.lines().find(|l| !l.starts_with('#')).unwrap();
    let bin = std::fs::canonicalize(assert_cmd::cargo::cargo_bin("lab")).unwrap();
    let lab_file = std::fs::canonicalize(&lab.lab).unwrap();
    let dir = lab_file.parent().unwrap().display().to_string();
    assert_eq!(
        line,
        format!(
            "*/15 * * * * cd {dir} && {} --lab {} schedule run-due --schedule weekly >> {dir}/schedule.log 2>&1",
            bin.display(),
            lab_file.display()
        )
    );
}

/// Waits until one place is taken in a device's queue (the slot's, for sim-pixel-2).
fn wait_queued(lab: &TempLab) {
    let until = Instant::now() + Duration::from_secs(60);
    while lab.try_sql::<i64>("SELECT ticket FROM device_queue").map(|t| t.len()).unwrap_or(0) != 1 {
        assert!(Instant::now() < until, "the slot never queued for sim-pixel-2");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Holds `device`'s lease in this process, as an engineer's ad-hoc campaign `adhoc-1`.
fn hold(lab: &TempLab, device: &str) -> lab::store::DeviceLease {
    let req = lab::store::LeaseRequest {
        purpose: "campaign".into(),
        campaign: Some("adhoc-1".into()),
        runbook: Some("tiny".into()),
        host: "laptop-7".into(),
        ..Default::default()
    };
    lab.hold(device, &req)
}

#[test]
fn a_slot_waits_for_its_phones_and_one_held_past_max_wait_is_skipped_naming_the_holder() {
    let lab = scheduled_lab(WEEKLY, 2);
    at(&lab, BEFORE, &["schedule", "run-due"]).assert().success();
    let held = hold(&lab, "sim-pixel-2");
    let runner = spawn_schedule(&lab, AFTER_SLOT, "run-due", Stdio::piped());
    wait_queued(&lab);
    std::thread::sleep(Duration::from_millis(500));
    assert!(lab.campaigns().is_empty(), "the slot started before all its phones were its own");
    drop(held);
    let out = runner.wait_with_output().unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("[sim-pixel-2] waiting its turn (number 1 in its queue): held by campaign adhoc-1"),
        "{text}"
    );
    assert_eq!(slots(&lab), [format!("{SLOT} finished ok")]);
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM attempts WHERE status = 'valid'"), [8]);

    // The next week, the phone is held for longer than the slot may wait: skipped, naming who.
    let lab = scheduled_lab(&format!("{WEEKLY}max_wait = \"1s\"\npriority = 5\n"), 2);
    at(&lab, BEFORE, &["schedule", "run-due"]).assert().success();
    let held = hold(&lab, "sim-pixel-2");
    let out = at(&lab, AFTER_SLOT, &["schedule", "run-due"]).timeout(Duration::from_secs(60)).output().unwrap();
    drop(held);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let because = "devices busy: sim-pixel-2 is held by campaign adhoc-1 (runbook tiny) on laptop-7";
    assert!(text.contains(&format!("skipped; {because}")), "{text}");
    let row = &slots(&lab)[0];
    assert!(row.starts_with(&format!("{SLOT} skipped {because}")), "{row}");
    assert!(lab.campaigns().is_empty(), "a skipped slot leaves no campaign");
    assert!(lab.sql::<i64>("SELECT ticket FROM device_queue").is_empty(), "nor a place in a queue");
}

/// A runner stopped (SIGTERM) while its slot waits for a held phone leaves the slot
/// interrupted, for the next runner to go on with; no campaign is left.
#[test]
fn a_slot_stopped_while_waiting_for_its_phones_is_left_for_the_next_runner() {
    let lab = scheduled_lab(WEEKLY, 2);
    at(&lab, BEFORE, &["schedule", "run-due"]).assert().success();
    let held = hold(&lab, "sim-pixel-2");
    let runner = spawn_schedule(&lab, AFTER_SLOT, "run-due", Stdio::piped());
    wait_queued(&lab);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(runner.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let out = runner.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stdout(&out));
    assert_eq!(slots(&lab), [format!("{SLOT} interrupted interrupted")]);
    assert!(lab.campaigns().is_empty());
    drop(held);
    // The next runner resumes it, now that the phone is free.
    at(&lab, "2026-03-29T01:10:00Z", &["schedule", "run-due"]).assert().success();
    assert_eq!(slots(&lab), [format!("{SLOT} finished ok")]);
}
