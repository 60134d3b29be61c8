//! The agents as a lab runs them (docs/agents.md): the systemd unit `lab agent install`
//! prints, and a schedule's slot run by an agent rather than by the schedule's runner.

use crate::common;

use std::process::Command;

use common::TempLab;

/// A running `lab agent --host local` of a test's lab, its lines in `agent.log` of the lab's
/// folder; killed when dropped (a failed test leaves no agent behind).
pub(crate) struct Agent {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl Agent {
    pub(crate) fn start(lab: &TempLab) -> Agent {
        let log = lab.dir.path().join("agent.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = lab.process(&["agent", "--host", "local"]).stdout(out).spawn().unwrap();
        // From `lab status`: the store may be PostgreSQL.
        crate::serve_submit::wait_until("the agent serves", || {
            let out = lab.cmd(&["status", "--json"]).output().unwrap();
            let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            status["agents"].as_array().is_some_and(|a| a.iter().any(|a| a["state"] == "serving"))
        });
        Agent { child, log }
    }

    /// What the agent said so far.
    pub(crate) fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM: it drains and must exit 0.
    pub(crate) fn drain(mut self) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), nix::sys::signal::Signal::SIGTERM)
            .unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "a drained agent exits 0: {status:?}\n{}", self.said());
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test_needs::needs(systemd_analyze)]
#[test]
fn agent_install_systemd_prints_a_unit_that_systemd_analyze_verifies() {
    let lab = TempLab::new();
    let out = lab.cmd(&["agent", "install", "--systemd", "--stop-timeout", "90m"]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let (name, body) = text.split_once("\n# ==> ").and_then(|(_, p)| p.split_once(" <==\n")).unwrap();
    assert_eq!(name, "lab-agent-local.service");
    let bin = std::fs::canonicalize(assert_cmd::cargo::cargo_bin("lab")).unwrap();
    let lab_file = std::fs::canonicalize(&lab.lab).unwrap();
    for line in [
        format!("ExecStart={} --lab {} agent --host local", bin.display(), lab_file.display()),
        format!("WorkingDirectory={}", lab_file.parent().unwrap().display()),
        "Restart=always".into(),
        "KillSignal=SIGTERM".into(),
        "KillMode=mixed".into(),
        "TimeoutStopSec=5400s".into(),
    ] {
        assert!(body.lines().any(|l| l == line), "{line} in\n{body}");
    }
    // The upgrade is said where the unit is printed.
    assert!(text.contains("(drains), replace the binary, `start`"), "{text}");

    let path = lab.dir.path().join(name);
    std::fs::write(&path, body).unwrap();
    assert!(
        Command::new("systemd-analyze").arg("--version").output().is_ok(),
        "needs systemd-analyze: it is not installed (Debian: apt-get install systemd)"
    );
    let out = Command::new("systemd-analyze").arg("verify").arg(&path).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "systemd-analyze verify said:\n{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn agent_install_quotes_a_lab_path_with_spaces_and_refuses_an_unknown_host() {
    let text = std::fs::read_to_string(common::root().join("lab.toml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spaced = dir.path().join("my lab");
    std::fs::create_dir(&spaced).unwrap();
    let file = spaced.join("lab.toml");
    std::fs::write(&file, text).unwrap();
    let out = Command::new(assert_cmd::cargo::cargo_bin("lab"))
        .arg("--lab")
        .arg(&file)
        .args(["agent", "install", "--systemd"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let file = std::fs::canonicalize(&file).unwrap();
    let want = format!(" --lab \"{}\" agent --host local", file.display());
    assert!(stdout.lines().any(|l| l.starts_with("ExecStart=") && l.ends_with(&want)), "{want} in\n{stdout}");
    assert!(stdout.lines().any(|l| l == "TimeoutStopSec=7200s"), "the default is 2h:\n{stdout}");

    let lab = TempLab::new();
    let out = lab.cmd(&["agent", "install", "--systemd", "--host", "nowhere"]).assert().code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("--host nowhere: no such [[host]]"), "{err}");
}

/// Sundays 02:30 in Berlin: 2026-03-29 is the spring-forward day (slot at 01:00Z).
const WEEKLY: &str =
    "\n[[schedule]]\nname = \"weekly\"\ncron = \"30 2 * * 0\"\ntimezone = \"Europe/Berlin\"\nrunbook = \"tiny.toml\"\n";

fn run_due(lab: &TempLab, now: &str) -> String {
    let out = lab.cmd(&["schedule", "run-due"]).env("LAB_NOW", now).assert().success().get_output().clone();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// (id, status, submitted) of every campaign in the store.
fn campaigns(lab: &TempLab) -> Vec<String> {
    lab.try_sql("SELECT id || ' ' || status || ' ' || submitted FROM campaigns ORDER BY created_at").unwrap_or_default()
}

#[test]
fn a_schedule_slot_on_an_agents_devices_is_run_by_the_agent_and_reviewed() {
    let text = std::fs::read_to_string(common::root().join("lab.toml")).unwrap() + WEEKLY;
    let lab = TempLab::from_text(&text);
    std::fs::write(lab.dir.path().join("tiny.toml"), crate::serve_submit::tiny_runbook("tiny")).unwrap();
    // Two slots: the first, run here before any agent, is the second's baseline.
    run_due(&lab, "2026-03-14T12:00:00Z");
    let here = run_due(&lab, "2026-03-15T01:35:00Z");
    assert!(here.contains("ran campaign tiny-"), "{here}");
    assert_eq!(campaigns(&lab).len(), 1, "{here}");
    assert!(campaigns(&lab)[0].ends_with(" done 0"), "run in the schedule's process: {:?}", campaigns(&lab));

    let agent = Agent::start(&lab);
    let text = run_due(&lab, "2026-03-22T01:35:00Z");
    let all = campaigns(&lab);
    assert_eq!(all.len(), 2, "{text}");
    assert!(all[1].ends_with(" done 1"), "the slot's campaign was submitted and the agent ran it: {all:?}");
    let id = all[1].split(' ').next().unwrap();
    assert!(text.contains(&format!("ran campaign {id}: ok")), "{text}");
    assert!(text.contains("report files:"), "the campaign's end is shown, then its review: {text}");
    let slots: Vec<String> =
        lab.sql("SELECT due_utc || ' ' || state || ' ' || COALESCE(outcome, '') || ' ' || COALESCE(campaign, '') FROM schedule_slots ORDER BY due_utc");
    assert_eq!(slots.last().unwrap(), &format!("2026-03-22T01:30:00Z finished ok {id}"), "{slots:?}");
    // Reviewed once it ended: the review's history page has the agent's campaign.
    let history = std::fs::read_to_string(lab.artifacts().join("_history/tiny.html")).unwrap();
    assert!(history.contains(id), "the history page the review wrote has {id}");

    agent.drain();
}

/// A regression found in a slot the agent ran is confirmed by a confirmation campaign
/// the schedule submits to the agent too, and the slot exits 5 as when it runs here.
#[test]
fn a_slots_confirmation_campaign_is_submitted_to_the_agent_and_confirms_the_regression() {
    use crate::schedule_regression::{after_week_one, run_due_at, runbook, slot};
    let lab = after_week_one("[schedule.confirm]\nmin_trials_per_arm = 20\nmax_trials_per_arm = 20\n");
    let rb = lab.dir.path().join("weekly.toml");
    let run = |now| run_due_at(&lab, now);
    assert_eq!(lab.sql::<i64>("SELECT submitted FROM campaigns"), [0], "week 1 ran here, before the agent");

    let agent = Agent::start(&lab);
    std::fs::write(&rb, runbook(5, 8)).unwrap();
    let out = run(slot(2) + chrono::Duration::minutes(2));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("regression confirmed"), "{text}");
    let rows: Vec<String> =
        lab.sql("SELECT runbook_name || ' ' || status || ' ' || submitted FROM campaigns ORDER BY created_at, id");
    assert_eq!(
        rows,
        ["weekly-envoy done 0", "weekly-envoy done 1", "weekly-envoy-confirm done 1"],
        "the week-2 slot and its confirmation ran on the agent"
    );
    let confirm_trials: Vec<i64> = lab.sql(
        "SELECT COUNT(DISTINCT a.trial_idx) FROM attempts a JOIN campaigns c ON c.id = a.campaign
         WHERE c.runbook_name = 'weekly-envoy-confirm' AND a.status = 'valid'",
    );
    assert_eq!(confirm_trials, [40], "20 trials per arm, each recorded valid once");
    assert_eq!(lab.sql::<String>("SELECT state FROM schedule_findings WHERE metric = 'cpu_pct'"), ["confirmed"]);

    agent.drain();
}

/// A slot's campaign that the serving agent does not take by the slot's deadline (the agent
/// is frozen with SIGSTOP: it still holds its liveness lock) is withdrawn and the slot is
/// busy, as one whose devices stayed held that long; nothing is left queued.
#[test]
fn a_slot_no_agent_takes_by_its_deadline_is_withdrawn_and_busy() {
    use nix::sys::signal::{Signal, kill};
    let text = std::fs::read_to_string(common::root().join("lab.toml")).unwrap() + WEEKLY + "max_wait = \"2s\"\n";
    let lab = TempLab::from_text(&text);
    std::fs::write(lab.dir.path().join("tiny.toml"), crate::serve_submit::tiny_runbook("tiny")).unwrap();
    run_due(&lab, "2026-03-14T12:00:00Z");
    let agent = Agent::start(&lab);
    let pid = nix::unistd::Pid::from_raw(agent.child.id() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let out = lab.cmd(&["schedule", "run-due"]).env("LAB_NOW", "2026-03-15T01:35:00Z").output().unwrap();
    kill(pid, Signal::SIGCONT).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "a skipped slot, as one whose devices stayed busy: {text}");
    assert!(text.contains("skipped; devices busy: no agent took its campaign before the slot's deadline"), "{text}");
    assert_eq!(campaigns(&lab), Vec::<String>::new(), "withdrawn: nothing queued for the agent when it wakes");
    agent.drain();
}

/// The same on PostgreSQL: the slot's campaign submitted, woken over LISTEN/NOTIFY, run by
/// the agent and followed to its end by the schedule's runner.
#[test_needs::needs(postgres)]
#[test]
fn on_postgres_a_schedule_slot_is_run_by_the_agent() {
    let url = common::fresh_postgres_database();
    let lab = TempLab::on_postgres(&url);
    let text = std::fs::read_to_string(&lab.lab).unwrap() + WEEKLY;
    std::fs::write(&lab.lab, text).unwrap();
    std::fs::write(lab.dir.path().join("tiny.toml"), crate::serve_submit::tiny_runbook("tiny")).unwrap();
    run_due(&lab, "2026-03-14T12:00:00Z");
    let agent = Agent::start(&lab);
    let text = run_due(&lab, "2026-03-15T01:35:00Z");
    let store = lab::store::Store::open_postgres(&lab::store::PgUrl::parse(&url).unwrap()).unwrap();
    let all = store.campaigns().unwrap();
    assert_eq!(all.len(), 1, "{text}");
    let id = all[0].id.to_string();
    assert_eq!(all[0].status, lab::store::CampaignStatus::Done, "{text}");
    assert_eq!(store.submitted(&id).unwrap(), Some(0), "submitted to the agents");
    assert!(text.contains(&format!("ran campaign {id}: ok")), "{text}");
    let slot = store.last_slot("weekly").unwrap().unwrap();
    assert_eq!((slot.state.as_str(), slot.outcome.as_deref()), ("finished", Some("ok")));
    agent.drain();
}
