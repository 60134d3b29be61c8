//! The lab's agents through the real binaries (docs/agents.md): `lab agent` on three lab
//! hosts (all this machine, each serving its own phones), campaigns submitted from two lab
//! files on one PostgreSQL store (and on the embedded SQLite one), `lab wait`, `lab cancel`,
//! and the faults: an agent killed mid-soak, SIGTERM's drain, `lab wait` killed, a plan the
//! agent cannot run, a sequential campaign spread over two agents.

use crate::common;
use crate::shared_lab::{SOAKER, wait_until};

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{TempLab, executable};
use lab::store::{AttemptStatus, PgUrl, Store};
use serde_json::Value;

/// Where a test's store is.
#[derive(Clone)]
enum Db {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Db {
    fn open(&self) -> Store {
        match self {
            Db::Sqlite(p) => Store::open(p).unwrap(),
            Db::Postgres(url) => Store::open_postgres(&PgUrl::parse(url).unwrap()).unwrap(),
        }
    }
}

/// The default lab with its phones on three lab hosts of this machine (h1: sim-iphone-1 and
/// sim-pixel-2, h2: sim-iphone-2, h3: sim-pixel-1 with its monitor) and `this-host` on
/// `local`; its store `db` (SQLite: `store`, a file shared with the other lab files).
fn spread_lab(db: &Db) -> TempLab {
    TempLab::from_text(&spread_text(db))
}

/// [`spread_lab`]'s text.
fn spread_text(db: &Db) -> String {
    let mut text = std::fs::read_to_string(common::root().join("lab.toml")).unwrap();
    let store = match db {
        Db::Sqlite(p) => p.display().to_string(),
        Db::Postgres(url) => url.clone(),
    };
    text = text.replace("store = \"artifacts/lab.db\"", &format!("store = \"{store}\""));
    for host in ["h1", "h2", "h3", "h3", "h1"] {
        text = text.replacen("host = \"local\"\n", &format!("host = \"{host}\"\n"), 1);
    }
    text = text.replace(
        "[[host]]\nname = \"local\"",
        "[[host]]\nname = \"h1\"\n[[host]]\nname = \"h2\"\n[[host]]\nname = \"h3\"\n[[host]]\nname = \"local\"",
    );
    text
}

/// A running `lab agent`, killed if the test ends first; its output in `log`.
struct Agent {
    child: Option<Child>,
    log: PathBuf,
}

impl Agent {
    fn start(lab: &TempLab, host: &str) -> Agent {
        let log = lab.dir.path().join(format!("agent-{host}-{}.log", now_ms()));
        let out = std::fs::File::create(&log).unwrap();
        let child = lab
            .process(&["agent", "--host", host])
            // moto's (unchecked) credentials, for labs whose raw files go to its bucket.
            .env("AWS_ACCESS_KEY_ID", "lab-test")
            .env("AWS_SECRET_ACCESS_KEY", "lab-test-secret")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let agent = Agent { child: Some(child), log };
        wait_until(&format!("the agent of {host} serves"), || agent_state(lab, host).as_deref() == Some("serving"));
        agent
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig).unwrap();
    }

    /// Waits for it to exit (at most `within`): its exit code and output.
    fn exit(mut self, within: Duration) -> (i32, String) {
        let mut child = self.child.take().unwrap();
        let until = Instant::now() + within;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < until, "the agent did not exit within {within:?}: {}", self.output());
            std::thread::sleep(Duration::from_millis(50));
        };
        (status.code().unwrap_or(-1), self.output())
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

fn status(lab: &TempLab) -> Value {
    let out = lab.cmd(&["status", "--json"]).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn agent_state(lab: &TempLab, host: &str) -> Option<String> {
    status(lab)["agents"].as_array()?.iter().find(|a| a["host"] == host)?["state"].as_str().map(String::from)
}

/// `lab submit RUNBOOK`: the new campaign's id.
fn submit(lab: &TempLab, runbook: &Path) -> String {
    let out = lab.cmd(&["submit", runbook.to_str().unwrap(), "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["id"].as_str().unwrap().to_string()
}

/// `lab wait ID`: exit code and output.
fn wait(lab: &TempLab, id: &str) -> (i32, String) {
    let out = lab.cmd(&["wait", id]).timeout(Duration::from_secs(240)).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

fn write(lab: &TempLab, name: &str, text: &str) -> PathBuf {
    let path = lab.dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A runbook of `repeats` trials of `duration` on `this-host` whose app logs its soaks to
/// `soaks.log` (start, end, pid), so a test sees when a trial soaks.
fn soak_runbook(lab: &TempLab, name: &str, duration: &str, repeats: u32, retries: u32) -> PathBuf {
    let app = lab.dir.path().join("soaker.sh");
    executable(&app, SOAKER);
    let log = lab.dir.path().join("soaks.log");
    write(
        lab,
        &format!("{name}.toml"),
        &format!(
            "name = \"{name}\"\nduration = \"{duration}\"\nrepeats = {repeats}\nretries = {retries}\n\
             devices = [\"this-host\"]\n[builds.only]\nbaseline = true\n[builds.only.host]\n\
             command = [\"{}\", \"{}\", \"{name}\"]\n",
            app.display(),
            log.display()
        ),
    )
}

/// Soaks begun so far, by the app's log.
fn soaks_started(lab: &TempLab) -> usize {
    std::fs::read_to_string(lab.dir.path().join("soaks.log")).unwrap_or_default().matches(" start ").count()
}

/// The phones' runbook of the quickstart with `seed`: 4 repeats of two builds.
fn phones_runbook(lab: &TempLab, name: &str, seed: u64) -> PathBuf {
    let text = std::fs::read_to_string(common::root().join("runbooks/quickstart.toml")).unwrap();
    let text = text
        .replace("name = \"quickstart\"", &format!("name = \"{name}\""))
        .replace("seed = 7", &format!("seed = {seed}"));
    write(lab, &format!("{name}.toml"), &text)
}

/// Every trial of campaign `id` has exactly one valid attempt, on the device the plan
/// names, and no attempt is recorded twice (the store's key refuses that).
fn each_trial_once(store: &Store, id: &str) {
    let trials = store.trials(id).unwrap();
    let attempts = store.attempts(id).unwrap();
    assert!(!trials.is_empty());
    for t in &trials {
        let valid: Vec<_> =
            attempts.iter().filter(|a| a.trial_idx == t.row.idx && a.status == AttemptStatus::Valid).collect();
        assert_eq!(valid.len(), 1, "trial {} has {} valid attempts", t.row.key, valid.len());
        assert_eq!(valid[0].device, t.row.device, "trial {} ran on another device", t.row.key);
    }
}

/// The `results.csv` `lab run` writes for `runbook` on a lab of the same phones without
/// agents (its own SQLite store).
fn without_agents(runbook: &Path) -> String {
    let lab = spread_lab(&Db::Sqlite(PathBuf::from("artifacts/lab.db")));
    lab.cmd(&["run", runbook.to_str().unwrap()]).timeout(Duration::from_secs(240)).assert().success();
    let id = &lab.campaigns()[0];
    std::fs::read_to_string(lab.artifacts().join(id).join("results.csv")).unwrap()
}

fn results(lab: &TempLab, id: &str) -> String {
    std::fs::read_to_string(lab.artifacts().join(id).join("results.csv")).unwrap()
}

/// Asserts two results.csv texts are equal, naming the first line that differs.
fn same_results(agents: &str, alone: &str) {
    if agents != alone {
        let (a, b): (Vec<&str>, Vec<&str>) = (agents.lines().collect(), alone.lines().collect());
        let k = a.iter().zip(&b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
        panic!(
            "results.csv differs at line {} ({} lines on agents, {} alone):\n  agents: {:?}\n  alone:  {:?}",
            k + 1,
            a.len(),
            b.len(),
            a.get(k),
            b.get(k)
        );
    }
}

#[test_needs::needs(postgres)]
#[test]
fn three_agents_run_two_lab_files_campaigns_once_each_as_lab_run_would() {
    let db = Db::Postgres(common::fresh_postgres_database());
    let (one, two) = (spread_lab(&db), spread_lab(&db));
    let agents: Vec<Agent> = ["h1", "h2", "h3"].iter().map(|h| Agent::start(&one, h)).collect();
    let (a, b) = (phones_runbook(&one, "phones-a", 7), phones_runbook(&two, "phones-b", 11));
    let (id_a, id_b) = (submit(&one, &a), submit(&two, &b));
    let (code_a, out_a) = wait(&one, &id_a);
    let (code_b, out_b) = wait(&two, &id_b);
    assert_eq!((code_a, code_b), (0, 0), "{out_a}\n{out_b}");
    assert!(out_b.contains(&format!("campaign {id_b} done: 16 valid, 0 failed")), "{out_b}");
    let store = db.open();
    for id in [&id_a, &id_b] {
        each_trial_once(&store, id);
        assert!(store.attempts(id).unwrap().iter().all(|a| a.status == AttemptStatus::Valid));
    }
    // Each agent ran its own host's phones only, for both campaigns.
    for (agent, phones) in
        agents.iter().zip([&["sim-iphone-1", "sim-pixel-2"][..], &["sim-iphone-2"], &["sim-pixel-1"]])
    {
        let log = agent.output();
        for p in ["sim-iphone-1", "sim-iphone-2", "sim-pixel-1", "sim-pixel-2"] {
            assert_eq!(
                log.contains(&format!("[{p}] ")),
                phones.contains(&p),
                "{p} in the log of {}:\n{log}",
                agent.log.display()
            );
        }
    }
    // Byte for byte what `lab run` writes without agents, in the lab file that waited.
    same_results(&results(&two, &id_b), &without_agents(&b));
    same_results(&results(&one, &id_a), &without_agents(&a));
    // The status shows every agent serving.
    let st = status(&two);
    let states: Vec<&str> = st["agents"].as_array().unwrap().iter().map(|a| a["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["serving"; 3], "{st}");
}

#[test]
fn agents_on_the_embedded_sqlite_store_run_a_campaign_and_lab_run_submits_to_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::Sqlite(dir.path().join("lab.db"));
    let lab = spread_lab(&db);
    let _agents: Vec<Agent> = ["h1", "h2", "h3"].iter().map(|h| Agent::start(&lab, h)).collect();
    let rb = phones_runbook(&lab, "phones", 7);
    // `lab run` where agents serve every host of the runbook: submitted, then followed.
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).timeout(Duration::from_secs(240)).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let store = db.open();
    let ids: Vec<String> = store.campaign_list().unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(ids.len(), 1);
    assert_eq!(store.submitted(&ids[0]).unwrap(), Some(0), "the campaign went to the agents");
    each_trial_once(&store, &ids[0]);
    assert!(text.contains("report files:"), "{text}");
    same_results(&results(&lab, &ids[0]), &without_agents(&rb));
}

/// Kills the soakers a killed agent left running (their pids are in the soak log).
fn kill_orphans(lab: &TempLab) {
    for line in std::fs::read_to_string(lab.dir.path().join("soaks.log")).unwrap_or_default().lines() {
        if let Some(pid) = line.split_whitespace().nth(3).and_then(|p| p.parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

#[test_needs::needs(postgres)]
#[test]
fn an_agent_killed_mid_soak_has_its_attempt_recorded_interrupted_and_the_trial_runs_again() {
    use nix::sys::signal::Signal;
    let db = Db::Postgres(common::fresh_postgres_database());
    let lab = spread_lab(&db);
    let local = Agent::start(&lab, "local");
    let _phones: Vec<Agent> = ["h1", "h2", "h3"].iter().map(|h| Agent::start(&lab, h)).collect();
    let id = submit(&lab, &soak_runbook(&lab, "soak", "3s", 2, 1));
    let phones = submit(&lab, &phones_runbook(&lab, "phones", 7));
    wait_until("the first trial soaks", || soaks_started(&lab) == 1);
    std::thread::sleep(Duration::from_millis(500));
    local.signal(Signal::SIGKILL);
    let (code, _) = local.exit(Duration::from_secs(10));
    assert_eq!(code, -1, "killed");
    let store = db.open();
    assert_eq!(store.in_flight_on("this-host").unwrap().len(), 1, "the attempt it began is in the store");
    assert!(store.attempts(&id).unwrap().is_empty(), "and not recorded");
    kill_orphans(&lab);
    // `lab status` says nothing runs it now, rather than "running".
    let shown = |id: &str| -> String {
        let all = status(&lab)["campaigns"].as_array().cloned().unwrap_or_default();
        all.iter()
            .find(|c| c["campaign"] == id)
            .map(|c| c["status"].as_str().unwrap_or_default().to_string())
            .unwrap_or_default()
    };
    wait_until("the killed agent is gone in `lab status`", || agent_state(&lab, "local").as_deref() == Some("gone"));
    assert_eq!(shown(&id), "running, no agent serves its devices (it goes on when one does)");

    // Served again: the lost attempt is recorded, the trial runs again, nothing twice.
    let _local = Agent::start(&lab, "local");
    let (code, out) = wait(&lab, &id);
    assert_eq!(code, 0, "{out}");
    each_trial_once(&store, &id);
    let attempts = store.attempts(&id).unwrap();
    let lost: Vec<_> = attempts.iter().filter(|a| a.status == AttemptStatus::Invalid).collect();
    assert_eq!(lost.len(), 1, "{attempts:?}");
    assert_eq!((lost[0].trial_idx, lost[0].attempt), (0, 0));
    assert!(
        lost[0].reasons[0].starts_with("interrupted: agent lost: the agent on local (pid "),
        "{:?}",
        lost[0].reasons
    );
    assert_eq!(attempts.len(), 3, "two valid attempts and the lost one");
    assert!(out.contains("agent lost"), "`lab wait` shows the lost attempt: {out}");
    assert!(store.in_flight_on("this-host").unwrap().is_empty());
    // The other agents' campaign was not touched.
    let (code, out) = wait(&lab, &phones);
    assert_eq!(code, 0, "{out}");
    each_trial_once(&store, &phones);
    assert!(store.attempts(&phones).unwrap().iter().all(|a| a.status == AttemptStatus::Valid));
}

#[test_needs::needs(postgres)]
#[test]
fn sigterm_drains_the_trial_in_progress_and_takes_nothing_new() {
    use nix::sys::signal::Signal;
    let db = Db::Postgres(common::fresh_postgres_database());
    let lab = spread_lab(&db);
    let local = Agent::start(&lab, "local");
    let id = submit(&lab, &soak_runbook(&lab, "drain", "2s", 3, 0));
    wait_until("the first trial soaks", || soaks_started(&lab) == 1);
    // Another campaign, whose part waits for the phone the first one holds.
    let behind = submit(&lab, &soak_runbook(&lab, "behind", "1s", 1, 0));
    let store = db.open();
    wait_until("its part waits for this-host", || {
        store.queued().unwrap().iter().any(|w| w.campaign.as_deref() == Some(behind.as_str()))
    });
    local.signal(Signal::SIGTERM);
    let (code, out) = local.exit(Duration::from_secs(60));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("draining"), "{out}");
    assert_eq!(
        store.campaign_without_plan(&behind).unwrap().status,
        lab::store::CampaignStatus::Queued,
        "the waiting part took nothing: its campaign waits for another agent"
    );
    let attempts = store.attempts(&id).unwrap();
    assert_eq!(attempts.len(), 1, "the trial in progress, and no other: {attempts:?}");
    assert_eq!(attempts[0].status, AttemptStatus::Valid, "{:?}", attempts[0].reasons);
    assert_eq!(soaks_started(&lab), 1, "nothing new was started");
    assert_eq!(store.outcome_counts(&id).unwrap().pending, 2);
    assert_eq!(agent_state(&lab, "local").as_deref(), Some("stopped"));
    // The next agent runs the rest, then drains when told from anywhere.
    let local = Agent::start(&lab, "local");
    for id in [&id, &behind] {
        let (code, out) = wait(&lab, id);
        assert_eq!(code, 0, "{out}");
        each_trial_once(&store, id);
    }
    let out = lab.cmd(&["agent", "drain", "local"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (code, log) = local.exit(Duration::from_secs(30));
    assert_eq!(code, 0, "{log}");
    let out = lab.cmd(&["agent", "drain", "local"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "no agent serves it any more");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no agent serves host local"));
}

/// Bad input to `lab submit` is exit 2 with the file and the fix, and stores nothing.
#[test]
fn lab_submit_of_a_bad_runbook_is_exit_2_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::Sqlite(dir.path().join("lab.db"));
    let lab = spread_lab(&db);
    let bad = write(
        &lab,
        "bad.toml",
        "name = \"bad\"\nduration = \"1s\"\nrepeats = 2\ndevices = [\"no-such-phone\"]\n[builds.only]\nbaseline = true\n[builds.only.sim]\ncpu_pct = 5\nwakeups_per_s = 5\nmemory_mb = 20\n",
    );
    let out = lab.cmd(&["submit", bad.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bad.toml") && stderr.contains("no-such-phone"), "{stderr}");
    assert!(!dir.path().join("lab.db").exists(), "no store was made");
    let missing = lab.cmd(&["submit", "no/such/runbook.toml"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(!dir.path().join("lab.db").exists());
}

#[test_needs::needs(postgres)]
#[test]
fn lab_cancel_removes_a_queued_campaign_and_stops_a_running_one_resumably() {
    let db = Db::Postgres(common::fresh_postgres_database());
    let lab = spread_lab(&db);
    // Queued (no agent serves `local` yet): removed.
    let queued = submit(&lab, &soak_runbook(&lab, "queued", "1s", 1, 0));
    let out = lab.cmd(&["cancel", &queued]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("was queued: removed"));
    assert!(db.open().campaign_without_plan(&queued).is_err(), "nothing of it is left");

    let _local = Agent::start(&lab, "local");
    let id = submit(&lab, &soak_runbook(&lab, "long", "20s", 1, 1));
    wait_until("the first trial soaks", || soaks_started(&lab) == 1);
    let since = Instant::now();
    let out = lab.cmd(&["cancel", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let store = db.open();
    wait_until("the attempt in progress is recorded interrupted", || !store.attempts(&id).unwrap().is_empty());
    assert!(since.elapsed() < Duration::from_secs(15), "stopped at once, not after its 20 s soak");
    let attempts = store.attempts(&id).unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].status, AttemptStatus::Invalid);
    assert!(attempts[0].reasons[0].starts_with("interrupted: "), "{:?}", attempts[0].reasons);
    assert_eq!(store.campaign_without_plan(&id).unwrap().status, lab::store::CampaignStatus::Interrupted);
    let (code, out) = wait(&lab, &id);
    assert_eq!(code, 130, "{out}");
    // Resumable: queued again, the agent runs what is left.
    let out = lab.cmd(&["submit", "--resume", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (code, out) = wait(&lab, &id);
    assert_eq!(code, 0, "{out}");
    each_trial_once(&store, &id);
}

/// A campaign submitted while the agent's device runs another: the agent's part of it gets
/// ready and waits in the device's queue, the campaign still queued (no manifest, nothing
/// running); it starts when the device is free. A cancel of another such waiting campaign
/// removes it, and its part leaves nothing behind.
#[test_needs::needs(postgres)]
#[test]
fn a_campaign_waiting_on_an_agents_busy_device_starts_when_it_is_free_and_a_cancel_leaves_nothing() {
    let db = Db::Postgres(common::fresh_postgres_database());
    let lab = spread_lab(&db);
    let _local = Agent::start(&lab, "local");
    let first = submit(&lab, &soak_runbook(&lab, "first", "4s", 1, 0));
    wait_until("the first trial soaks", || soaks_started(&lab) == 1);
    let behind = submit(&lab, &soak_runbook(&lab, "behind", "1s", 1, 0));
    let gone = submit(&lab, &soak_runbook(&lab, "gone", "1s", 1, 0));
    let store = db.open();
    let waits = |id: &str| store.queued().unwrap().iter().any(|w| w.campaign.as_deref() == Some(id));
    wait_until("the agent's parts wait in this-host's queue", || waits(&behind) && waits(&gone));
    for id in [&behind, &gone] {
        assert_eq!(store.campaign_without_plan(id).unwrap().status, lab::store::CampaignStatus::Queued);
        assert!(!lab.artifacts().join(id).join("manifest.json").exists(), "{id} has not started");
    }
    let out = lab.cmd(&["cancel", &gone]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    wait_until("the cancelled part has left the queue", || !waits(&gone));
    wait_until("… and its folder", || !lab.artifacts().join(&gone).exists());
    assert_eq!(wait(&lab, &first).0, 0);
    let (code, out) = wait(&lab, &behind);
    assert_eq!(code, 0, "{out}");
    each_trial_once(&store, &behind);
    assert!(lab.artifacts().join(&behind).join("manifest.json").exists());
    assert!(store.campaign_without_plan(&gone).is_err(), "nothing of the cancelled one is left");
    assert_eq!(soaks_started(&lab), 2, "the cancelled campaign ran nothing");
}

#[test_needs::needs(postgres)]
#[test]
fn a_killed_lab_wait_leaves_the_campaign_running() {
    let db = Db::Postgres(common::fresh_postgres_database());
    let lab = spread_lab(&db);
    let _local = Agent::start(&lab, "local");
    let id = submit(&lab, &soak_runbook(&lab, "waited", "1s", 3, 0));
    let mut waiter = lab.process(&["wait", &id]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    wait_until("the first trial soaks", || soaks_started(&lab) >= 1);
    waiter.kill().unwrap();
    waiter.wait().unwrap();
    let (code, out) = wait(&lab, &id);
    assert_eq!(code, 0, "{out}");
    assert_eq!(soaks_started(&lab), 3);
    each_trial_once(&db.open(), &id);
}

#[test]
fn an_agent_refuses_a_plan_newer_than_it_runs_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lab.db");
    let db = Db::Sqlite(path.clone());
    let lab = spread_lab(&db);
    let id = submit(&lab, &soak_runbook(&lab, "future", "1s", 1, 0));
    // As a newer lab would have stored it.
    rusqlite::Connection::open(&path).unwrap().execute("UPDATE campaigns SET plan_format = 99", []).unwrap();
    let _local = Agent::start(&lab, "local");
    let refused = || {
        status(&lab)["agents"][0]["refused"].as_str().map(String::from).filter(|r| !r.is_empty()).unwrap_or_default()
    };
    wait_until("the agent says it refused the campaign", || !refused().is_empty());
    let r = refused();
    assert!(r.starts_with(&format!("{id}: its plan is format 99, this agent (lab ")), "{r}");
    assert!(r.contains("fix: upgrade this agent (drain, replace, start)"), "{r}");
    let store = db.open();
    assert_eq!(store.campaign_without_plan(&id).unwrap().status, lab::store::CampaignStatus::Queued);
    assert!(store.attempts(&id).unwrap().is_empty(), "nothing of it ran differently");
}

#[test_needs::needs(postgres)]
#[test]
fn a_sequential_campaign_over_two_agents_decides_each_look_once_as_lab_run_does() {
    let db = Db::Postgres(common::fresh_postgres_database());
    let lab = spread_lab(&db);
    let _agents: Vec<Agent> = ["h1", "h2", "h3"].iter().map(|h| Agent::start(&lab, h)).collect();
    let rb = write(&lab, "sequential.toml", &crate::sequential_campaign::three_variants());
    let id = submit(&lab, &rb);
    let out = lab.cmd(&["wait", &id, "--message-format", "json"]).timeout(Duration::from_secs(240)).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let events: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let store = db.open();
    each_trial_once(&store, &id);
    // The same plan grew the same way: the same trials and values as `lab run`'s.
    same_results(&results(&lab, &id), &without_agents(&rb));
    // Each pair and model decided once, whichever agent completed its look.
    let mut decided: Vec<String> = events
        .iter()
        .filter(|e| e["event"] == "variant_decided")
        .map(|e| format!("{} {} {}", e["model"], e["variant"], e["look"]))
        .collect();
    let n = decided.len();
    decided.sort();
    decided.dedup();
    assert_eq!(decided.len(), n, "a look decided twice: {decided:?}");
    assert!(n >= 6, "every pair on both models decided: {decided:?}");
    let rounds: Vec<u64> =
        events.iter().filter(|e| e["event"] == "trials_added").map(|e| e["round"].as_u64().unwrap()).collect();
    let mut sorted = rounds.clone();
    sorted.dedup();
    assert_eq!(sorted, rounds, "each round added once: {rounds:?}");
    assert!(!rounds.is_empty(), "the campaign had more than one look");
}

/// A PostgreSQL cluster of this test's own (tests/pg-cluster.sh), stopped when dropped: a
/// restart must not cut the other tests' server.
struct OwnCluster {
    url: String,
    dir: String,
    bin: String,
}

impl OwnCluster {
    fn start() -> OwnCluster {
        let out = std::process::Command::new("bash").arg(common::root().join("tests/pg-cluster.sh")).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let var = |name: &str| {
            let at = text.find(&format!("{name}='")).unwrap_or_else(|| panic!("{name} in {text}")) + name.len() + 2;
            text[at..].split('\'').next().unwrap().to_string()
        };
        OwnCluster {
            url: var("LAB_TEST_POSTGRES"),
            dir: var("LAB_TEST_POSTGRES_DIR"),
            bin: var("LAB_TEST_POSTGRES_BIN"),
        }
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = format!("{}/data", self.dir);
        let pg_ctl = format!("{}/pg_ctl", self.bin);
        // The server pg_ctl starts keeps what it inherits open: no pipes, its log a file.
        let log = format!("{}/server.log", self.dir);
        let mut argv: Vec<&str> = vec![&pg_ctl, "-D", &data, "-w", "-l", &log];
        argv.extend(args);
        // As root (CI) the server runs as `postgres`, as the script started it.
        let mut cmd = if nix::unistd::geteuid().is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).args(&argv);
            c
        } else {
            let mut c = std::process::Command::new(argv[0]);
            c.args(&argv[1..]);
            c
        };
        let status = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status();
        assert!(status.unwrap().success(), "pg_ctl {args:?}: see {log}");
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let data = format!("{}/data", self.dir);
        let pg_ctl = format!("{}/pg_ctl", self.bin);
        let _ = std::process::Command::new("runuser")
            .args(["-u", "postgres", "--", &pg_ctl, "-D", &data, "-m", "immediate", "stop"])
            .output();
        let _ = std::process::Command::new(&pg_ctl).args(["-D", &data, "-m", "immediate", "stop"]).output();
    }
}

#[test_needs::needs(postgres)]
#[test]
fn agents_reconnect_after_postgresql_restarts_mid_campaign_and_lose_nothing() {
    let pg = OwnCluster::start();
    let db = Db::Postgres(pg.url.clone());
    let lab = spread_lab(&db);
    let local = Agent::start(&lab, "local");
    let _phones = Agent::start(&lab, "h1");
    let id = submit(&lab, &soak_runbook(&lab, "restart", "2s", 3, 1));
    wait_until("the first trial soaks", || soaks_started(&lab) == 1);
    pg.pg_ctl(&["-m", "fast", "restart"]);
    // A campaign submitted after the restart reaches the other agent, which listens again.
    let phones = write(
        &lab,
        "pixel.toml",
        "name = \"pixel\"\nduration = \"10m\"\nrepeats = 2\ndevices = [\"sim-pixel-2\"]\n[builds.only]\nbaseline = true\n[builds.only.sim]\ncpu_pct = 5\nwakeups_per_s = 5\nmemory_mb = 20\n",
    );
    let phones = submit(&lab, &phones);
    let (code, out) = wait(&lab, &id);
    assert_eq!(code, 0, "{out}\n{}", local.output());
    let store = db.open();
    each_trial_once(&store, &id);
    // The attempt the restart cut (its lease's session ended with the server) is recorded,
    // not dropped, and no other is.
    let invalid: Vec<_> =
        store.attempts(&id).unwrap().into_iter().filter(|a| a.status == AttemptStatus::Invalid).collect();
    assert!(invalid.len() <= 1, "{invalid:?}");
    for a in &invalid {
        assert!(a.reasons[0].starts_with("interrupted: "), "{:?}", a.reasons);
    }
    assert!(store.in_flight_on("this-host").unwrap().is_empty());
    let (code, out) = wait(&lab, &phones);
    assert_eq!(code, 0, "{out}");
    each_trial_once(&store, &phones);
    assert!(local.output().contains("serving"), "{}", local.output());
}

/// Each thread's context switches (voluntary and not) so far, by thread id: a sleeping
/// thread that wakes adds one.
fn switches(pid: i32) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let n = status
            .lines()
            .filter(|l| l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        out.insert(task.file_name().to_string_lossy().into_owned(), n);
    }
    out
}

/// Wake-ups between two readings: each thread's switches, a thread that went away (it
/// woke to end) and a new one (it woke to start) count too.
fn wakeups(before: &std::collections::BTreeMap<String, u64>, after: &std::collections::BTreeMap<String, u64>) -> u64 {
    let gone = before.keys().filter(|t| !after.contains_key(*t)).count() as u64;
    let moved: u64 = after.iter().map(|(t, n)| n - before.get(t).copied().unwrap_or(0)).sum();
    gone + moved
}

/// Each of an agent's threads runs with the short slice it asked for
/// (src/runner/slices.rs), where the kernel keeps custom slices (Linux 6.12 and newer;
/// older kernels show no `se.slice` or ignore it). `/proc/PID/task/TID/sched`'s
/// `se.slice` is the kernel's own figure, in nanoseconds.
#[test]
fn an_agents_threads_run_with_short_slices() {
    let lab = spread_lab(&Db::Sqlite(PathBuf::from("artifacts/lab.db")));
    let agent = Agent::start(&lab, "local");
    let slices: Vec<(String, Option<u64>)> = std::fs::read_dir(format!("/proc/{}/task", agent.pid()))
        .unwrap()
        .flatten()
        .map(|task| {
            let sched = std::fs::read_to_string(task.path().join("sched")).unwrap_or_default();
            let slice = sched
                .lines()
                .find(|l| l.starts_with("se.slice"))
                .and_then(|l| l.rsplit(':').next()?.trim().parse::<u64>().ok());
            (task.file_name().to_string_lossy().into_owned(), slice)
        })
        .collect();
    // The main thread and the runtime's workers at least.
    assert!(slices.len() >= 2, "{slices:?}");
    if lab::runner::kernel_keeps_slices() {
        let main = slices.iter().find(|(tid, _)| *tid == agent.pid().to_string());
        // The main thread is not the runtime's: it keeps the default.
        assert!(main.is_some_and(|(_, s)| *s != Some(lab::runner::SHORT_SLICE_NS)), "{slices:?}");
        let short = slices.iter().filter(|(_, s)| *s == Some(lab::runner::SHORT_SLICE_NS)).count();
        assert_eq!(short, slices.len() - 1, "threads without the short slice: {slices:?}");
    }
    let (code, out) = {
        agent.signal(nix::sys::signal::Signal::SIGTERM);
        agent.exit(Duration::from_secs(30))
    };
    assert_eq!(code, 0, "{out}");
}

/// The measure: an idle agent, and one whose device soaks, over a minute. Tokio's
/// idle blocking threads end 10 s after their last job; the minute starts after that.
#[test_needs::needs(postgres)]
#[test]
fn an_idle_agent_and_one_whose_device_soaks_wake_zero_times_in_a_minute() {
    let db = Db::Postgres(common::fresh_postgres_database());
    let lab = spread_lab(&db);
    let soaking = Agent::start(&lab, "local");
    let idle = Agent::start(&lab, "h1");
    let id = submit(&lab, &soak_runbook(&lab, "quiet", "100s", 1, 0));
    wait_until("the trial soaks", || soaks_started(&lab) == 1);
    std::thread::sleep(Duration::from_secs(12));
    let (s0, i0) = (switches(soaking.pid()), switches(idle.pid()));
    std::thread::sleep(Duration::from_secs(60));
    let (s1, i1) = (switches(soaking.pid()), switches(idle.pid()));
    let store = db.open();
    assert_eq!(store.attempts(&id).unwrap().len(), 0, "still soaking when measured");
    assert_eq!(wakeups(&i0, &i1), 0, "the idle agent woke: {i0:?} → {i1:?}");
    assert_eq!(wakeups(&s0, &s1), 0, "the soaking agent woke: {s0:?} → {s1:?}");
    lab.cmd(&["cancel", &id]).assert().success();
}

/// docs/agents.md's role for agents: it may read and write the lab's tables and nothing
/// else (no DDL); the store's owner created them.
#[test_needs::needs(postgres)]
#[test]
fn an_agent_runs_with_a_role_that_may_only_read_and_write_the_labs_tables() {
    let url = common::fresh_postgres_database();
    let owner = spread_lab(&Db::Postgres(url.clone()));
    owner.cmd(&["status"]).assert().success(); // the owner makes the tables
    let (base, database) = url.rsplit_once('/').unwrap();
    let role = format!("agent_{database}");
    let grants = format!(
        "CREATE ROLE {role} LOGIN PASSWORD 'agent-pw';
         GRANT CONNECT ON DATABASE {database} TO {role};
         GRANT USAGE ON SCHEMA public TO {role};
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role};
         GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role};"
    );
    let admin = lab::store::PgOwner::connect(&PgUrl::parse(&url).unwrap()).unwrap();
    admin.call(move |c| c.batch(&grants)).unwrap();
    let (scheme, host) = base.split_once('@').unwrap();
    let scheme = scheme.split_once("//").unwrap().0;
    let agent_url = format!("{scheme}//{role}:agent-pw@{host}/{database}");
    let limited = spread_lab(&Db::Postgres(agent_url));
    let _agent = Agent::start(&limited, "local");
    let id = submit(&owner, &soak_runbook(&owner, "limited", "1s", 2, 0));
    let (code, out) = wait(&owner, &id);
    assert_eq!(code, 0, "{out}");
    each_trial_once(&Db::Postgres(url).open(), &id);
}

/// Ctrl-C: `lab wait` detaches (the campaign goes on); `lab run` on agents cancels, as it
/// stops a campaign it runs itself, and the campaign stays resumable.
#[test_needs::needs(postgres)]
#[test]
fn ctrl_c_detaches_lab_wait_and_cancels_lab_run_on_agents() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let db = Db::Postgres(common::fresh_postgres_database());
    let lab = spread_lab(&db);
    let _local = Agent::start(&lab, "local");
    let store = db.open();

    let id = submit(&lab, &soak_runbook(&lab, "detached", "1s", 2, 0));
    let waiter = lab.process(&["wait", &id]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_until("the first trial soaks", || soaks_started(&lab) >= 1);
    kill(Pid::from_raw(waiter.id() as i32), Signal::SIGINT).unwrap();
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("detached; campaign {id} goes on")));
    let (code, text) = wait(&lab, &id);
    assert_eq!(code, 0, "{text}");
    each_trial_once(&store, &id);

    let rb = soak_runbook(&lab, "cancelled", "30s", 1, 1);
    let run =
        lab.process(&["run", rb.to_str().unwrap()]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_until("its trial soaks", || soaks_started(&lab) >= 3);
    kill(Pid::from_raw(run.id() as i32), Signal::SIGINT).unwrap();
    let out = run.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{text}");
    let cancelled = store.campaign_list().unwrap().into_iter().find(|c| c.runbook_name == "cancelled").unwrap();
    assert_eq!(cancelled.status, lab::store::CampaignStatus::Interrupted, "{text}");
    assert!(text.contains(&format!("lab submit --resume {}", cancelled.id)), "{text}");
    wait_until("the attempt in progress is recorded interrupted", || store.attempts(&cancelled.id).unwrap().len() == 1);
}

/// [`spread_lab`] with its raw files in `bucket` of moto's S3 server, written first to the
/// folder `local` beside the lab file.
fn spread_bucket_lab(db: &Db, s3: &common::s3::S3, bucket: &str, local: &str) -> TempLab {
    let text = spread_text(db).replace("artifacts = \"artifacts\"", &format!("artifacts = \"s3://{bucket}/runs\""));
    assert!(text.contains("s3://"));
    TempLab::from_text(&format!(
        "{text}\n[lab.object_store]\nendpoint = \"{}\"\nallow_http = true\nregion = \"us-east-1\"\nlocal = \"{local}\"\n",
        s3.endpoint
    ))
}

/// The scenario with the raw files: three agents put every raw file of a campaign
/// submitted from another lab file in the bucket, each with the size and SHA-256 the store
/// keeps (computed here from the object's bytes, read back by boto3), and `lab serve` on a
/// third lab file, with nothing local, downloads one.
#[test_needs::needs(postgres, s3)]
#[test]
fn three_agents_put_every_raw_file_in_the_bucket_and_lab_serve_elsewhere_downloads_one() {
    let s3 = common::s3::S3::shared();
    let bucket = s3.bucket("agents");
    let db = Db::Postgres(common::fresh_postgres_database());
    let (one, two) = (spread_bucket_lab(&db, &s3, &bucket, "raw"), spread_bucket_lab(&db, &s3, &bucket, "raw"));
    let _agents: Vec<Agent> = ["h1", "h2", "h3"].iter().map(|h| Agent::start(&one, h)).collect();
    let id = submit(&two, &phones_runbook(&two, "phones", 7));
    let (code, out) = wait(&two, &id);
    assert_eq!(code, 0, "{out}");
    let store = db.open();
    each_trial_once(&store, &id);
    let rows = store.raw_files(&id).unwrap();
    let objects = s3.objects(&bucket);
    for a in store.attempts(&id).unwrap() {
        let folder = a.artifact_dir.rsplit('/').next().unwrap().to_string();
        assert!(rows.iter().any(|r| r.path.starts_with(&format!("{folder}/"))), "no raw file of {folder}");
    }
    for r in &rows {
        assert!(r.confirmed_at.is_some(), "{} not confirmed", r.path);
        assert_eq!(objects.get(&r.key), Some(&(r.size, r.sha256.clone())), "{}", r.key);
    }
    let row = rows.iter().find(|r| r.path.contains('/')).unwrap();
    let original = std::fs::read(one.dir.path().join("raw").join(&id).join(&row.path)).unwrap();

    let elsewhere = spread_bucket_lab(&db, &s3, &bucket, "elsewhere");
    let mut serve = elsewhere
        .process(&["serve", "--bind", "127.0.0.1:0"])
        .env("AWS_ACCESS_KEY_ID", "lab-test")
        .env("AWS_SECRET_ACCESS_KEY", "lab-test-secret")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = crate::serve::address_said(&mut serve);
    let got = crate::artifacts_s3::http_get(&addr, &format!("/artifacts/{id}/{}", row.path));
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(got, original, "{}", row.path);
    assert!(!elsewhere.dir.path().join("elsewhere").join(&id).exists(), "nothing of it is local there");
}
