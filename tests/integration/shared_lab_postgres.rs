//! The shared lab on PostgreSQL, through the real binary: two lab files (as two machines
//! have, each with its own artifacts folder) name one store on Debian's PostgreSQL server.
//! Their campaigns take turns on `this-host`, `--no-wait` names the holder, SIGKILL of the
//! holder lets the waiter start at once, and either lab file reports the other's campaign.
//! The quickstart's `results.csv` is byte for byte SQLite's, and the password in the
//! store's URL appears in no output and no file.

use crate::common;
use crate::shared_lab::{finish, runbook_logging_to, runs, spawn, wait_until};

use std::time::{Duration, Instant};

use common::TempLab;
use lab::store::{PgUrl, Store};

fn store(url: &str) -> Store {
    Store::open_postgres(&PgUrl::parse(url).unwrap()).unwrap()
}

#[test_needs::needs(postgres)]
#[test]
fn two_lab_files_on_one_postgres_store_take_turns_and_a_killed_holder_frees_the_device() {
    let url = common::fresh_postgres_database();
    let (one, two) = (TempLab::on_postgres(&url), TempLab::on_postgres(&url));
    let log = one.dir.path().join("soaks.log");
    let s = store(&url);
    let holder = || s.lease_holder("this-host").unwrap().and_then(|h| h.campaign).unwrap_or_default();
    let queued = || s.queued().unwrap().len();

    let a = runbook_logging_to(&one, "turn-a", "2s", 2, &log);
    let b = runbook_logging_to(&two, "turn-b", "1s", 2, &log);
    let first = spawn(&one, &["run", a.to_str().unwrap()]);
    wait_until("the first run holds this-host", || holder().starts_with("turn-a-"));
    let out = two.cmd(&["run", b.to_str().unwrap(), "--no-wait"]).timeout(Duration::from_secs(60)).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains(&format!("this-host is held by campaign {} (runbook turn-a) on ", holder())), "{stderr}");
    assert!(stderr.contains(&format!("(pid {}) since 20", first.id())), "{stderr}");
    assert_eq!(queued(), 0, "--no-wait left a place in the queue");

    let second = spawn(&two, &["run", b.to_str().unwrap()]);
    wait_until("the second lab file's run waits in the queue", || queued() == 1);
    // Either lab file sees the holder and the queue.
    let status: serde_json::Value =
        serde_json::from_slice(&one.cmd(&["status", "--json"]).output().unwrap().stdout).unwrap();
    let queues = status["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 2, "{queues:?}");
    assert!(queues[0]["who"].as_str().unwrap().starts_with("campaign turn-a-"), "{queues:?}");
    assert!(queues[1]["who"].as_str().unwrap().ends_with("(runbook turn-b)"), "{queues:?}");
    let (code_a, out_a) = finish(first);
    let (code_b, out_b) = finish(second);
    assert_eq!((code_a, code_b), (0, 0), "{out_a}\n{out_b}");
    assert!(out_b.contains("[this-host] its turn came after "), "{out_b}");
    let soaks = runs(&log);
    let tags: Vec<&str> = soaks.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(tags, ["turn-a", "turn-a", "turn-b", "turn-b"], "{soaks:?}");
    for w in soaks.windows(2) {
        assert!(w[0].2.expect("an app run without its end") <= w[1].1, "two apps ran at once: {soaks:?}");
    }

    // One store: the second lab file reports the first one's campaign, from the store alone.
    let campaigns: Vec<String> = s.campaigns().unwrap().into_iter().map(|c| c.id).collect();
    let first_id = campaigns.iter().find(|c| c.starts_with("turn-a-")).unwrap();
    let report = two.cmd(&["report", first_id]).output().unwrap();
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    assert!(String::from_utf8_lossy(&report.stdout).contains("2 of 2 trials valid"));

    // SIGKILL of the holder: its session ends, and the waiter on the other lab file starts.
    let long = runbook_logging_to(&one, "long-a", "60s", 1, &log);
    let short = runbook_logging_to(&two, "short-b", "1s", 1, &log);
    let mut killed_one = spawn(&one, &["run", long.to_str().unwrap()]);
    wait_until("the long run holds this-host", || holder().starts_with("long-a-"));
    let waiter = spawn(&two, &["run", short.to_str().unwrap()]);
    wait_until("the short run waits", || queued() == 1);
    killed_one.kill().unwrap();
    let killed = Instant::now();
    killed_one.wait().unwrap();
    wait_until("the waiter holds this-host", || holder().starts_with("short-b-"));
    let after = killed.elapsed();
    for r in runs(&log).iter().filter(|r| r.0 == "long-a") {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(r.3), nix::sys::signal::Signal::SIGKILL);
    }
    assert!(after < Duration::from_secs(5), "the waiter started {after:?} after the holder died");
    let (code, out) = finish(waiter);
    assert_eq!(code, 0, "{out}");
}

/// Has the server end every session of `application` on `admin`'s database (not
/// `admin`'s own), as a restart or a cut network would; how many it ended.
pub(crate) fn end_sessions(admin: &lab::store::PgOwner, application: &str) -> usize {
    let application = application.to_string();
    admin
        .call(move |c| {
            c.query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE application_name = ?1 AND datname = current_database() AND pid <> pg_backend_pid()",
                &[lab::store::Value::Text(application.clone())],
            )
        })
        .unwrap()
        .len()
}

/// Ends the lock sessions (`lab-lock`) of the current database that hold an advisory
/// lock, as a restart or a network cut would; how many. (Sessions kept for a process's next
/// lock hold none.)
fn end_lock_holders(admin: &lab::store::PgOwner) -> usize {
    admin
        .call(|c| {
            c.query(
                "SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
                 WHERE a.application_name = 'lab-lock' AND a.datname = current_database()
                   AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted)",
                &[],
            )
        })
        .unwrap()
        .len()
}

/// `artifacts/<the one campaign>/results.csv` of `lab`.
fn results_csv(lab: &TempLab) -> Vec<u8> {
    let dirs: Vec<_> = std::fs::read_dir(lab.artifacts())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("results.csv").exists())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    std::fs::read(dirs[0].join("results.csv")).unwrap()
}

#[test_needs::needs(postgres)]
#[test]
fn the_quickstart_gives_the_same_results_csv_on_both_backends() {
    let (sqlite, postgres) = (TempLab::new(), TempLab::on_postgres(&common::fresh_postgres_database()));
    for lab in [&sqlite, &postgres] {
        lab.cmd(&["run", "runbooks/quickstart.toml"]).timeout(Duration::from_secs(300)).assert().success();
    }
    assert!(!postgres.store().exists(), "the PostgreSQL lab wrote a SQLite store");
    let (a, b) = (results_csv(&sqlite), results_csv(&postgres));
    assert!(a.len() > 1000);
    assert!(a == b, "results.csv differs between SQLite and PostgreSQL");
}

/// Every file under `dir`, with its bytes.
fn files(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out
}

#[test_needs::needs(postgres)]
#[test]
fn the_password_in_the_store_url_appears_in_no_output_and_no_file_of_a_campaign() {
    let url = common::fresh_postgres_database();
    let password = url.split_once("://").unwrap().1.split_once('@').unwrap().0.split_once(':').unwrap().1.to_string();
    assert!(password.len() >= 8, "the test server has a password");
    let lab = TempLab::on_postgres(&url);
    let mut outputs = Vec::new();
    let mut run = |args: &[&str], ok: bool| {
        let out = lab.cmd(args).timeout(Duration::from_secs(300)).output().unwrap();
        assert_eq!(out.status.success(), ok, "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        outputs.push((format!("{args:?}"), [out.stdout, out.stderr].concat()));
    };
    run(&["run", "runbooks/quickstart.toml", "--message-format", "json"], true);
    let id = store(&url).latest_campaign_id().unwrap().unwrap();
    run(&["run", "runbooks/quickstart.toml"], true);
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["report", &id],
        &["history", "quickstart"],
        &["plan", "runbooks/quickstart.toml"],
        &["report", &id, "--format", "junit"],
    ] {
        run(args, true);
    }
    // A refused connection names the store without its password.
    let wrong = TempLab::on_postgres(&url.replace(&password, "not-the-password"));
    let out = wrong.cmd(&["status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("postgres://lab@127.0.0.1:") && !said.contains("not-the-password"), "{said}");

    let lab_file = lab.lab.clone();
    let mut checked = 0;
    for (name, bytes) in outputs.into_iter().chain(
        files(lab.dir.path()).into_iter().filter(|(p, _)| *p != lab_file).map(|(p, b)| (p.display().to_string(), b)),
    ) {
        assert!(!String::from_utf8_lossy(&bytes).contains(&password), "the password is in {name}");
        checked += 1;
    }
    assert!(checked > 20, "only {checked} outputs and files");
    // Nor in what the store keeps of the lab file.
    let kept = store(&url).campaign(&id).unwrap().lab_text;
    assert!(kept.contains("store = \"postgres://lab:********@127.0.0.1:") && !kept.contains(&password), "{kept}");
}

/// `lab store copy`: a SQLite lab's campaigns into PostgreSQL and back into a new SQLite
/// file, each campaign's `report.json` the same byte for byte; a second copy adds nothing.
#[test_needs::needs(postgres)]
#[test]
fn lab_store_copy_moves_a_lab_into_postgres_and_back_with_every_report_the_same() {
    let url = common::fresh_postgres_database();
    let sqlite = TempLab::new();
    for _ in 0..2 {
        sqlite.cmd(&["run", "runbooks/quickstart.toml"]).timeout(Duration::from_secs(300)).assert().success();
    }
    let from = sqlite.store();
    let out = sqlite.cmd(&["store", "copy", from.to_str().unwrap(), &url]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with("copied 2 campaigns ("), "{said}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("[2/2] quickstart-"));
    let again = sqlite.cmd(&["store", "copy", from.to_str().unwrap(), &url]).output().unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).starts_with("copied 0 campaigns (0 rows)"));
    assert!(String::from_utf8_lossy(&again.stdout).contains("2 were there already"));
    let back = sqlite.dir.path().join("back.db");
    sqlite.cmd(&["store", "copy", &url, back.to_str().unwrap()]).assert().success();

    let report = |store: &str, id: &str| {
        let out = sqlite.cmd(&["report", id, "--format", "json"]).env("LAB_STORE", store).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let ids = sqlite.campaigns();
    assert_eq!(ids.len(), 2);
    for id in &ids {
        let want = report(from.to_str().unwrap(), id);
        assert!(want.len() > 1000);
        assert!(report(&url, id) == want, "{id}: report.json differs on PostgreSQL");
        assert!(report(back.to_str().unwrap(), id) == want, "{id}: report.json differs after the way back");
    }

    // Bad input changes nothing: one store twice, a file not there, a server not there.
    let same = sqlite.cmd(&["store", "copy", &url, &url]).output().unwrap();
    assert_eq!(same.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&same.stderr).contains("FROM and TO are one store"));
    let missing = sqlite.cmd(&["store", "copy", "no/such.db", &url]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no store at no/such.db"));
    let gone = sqlite.cmd(&["store", "copy", from.to_str().unwrap(), "postgres://lab@127.0.0.1:1/x"]).output().unwrap();
    assert_eq!(gone.status.code(), Some(3), "{}", String::from_utf8_lossy(&gone.stderr));
}

/// The server ends the store's connections mid-campaign (as a restart or a failover does):
/// the runner connects again and the campaign finishes, every attempt recorded once. The
/// lock sessions are left alone: ending one frees its device, as it should.
#[test_needs::needs(postgres)]
#[test]
fn a_campaign_whose_store_connection_is_cut_connects_again_and_records_every_attempt_once() {
    let url = common::fresh_postgres_database();
    let lab = TempLab::on_postgres(&url);
    let log = lab.dir.path().join("soaks.log");
    let rb = runbook_logging_to(&lab, "cut", "1s", 4, &log);
    let s = store(&url);
    let run = spawn(&lab, &["run", rb.to_str().unwrap()]);
    let admin = lab::store::PgOwner::connect(&PgUrl::parse(&url).unwrap()).unwrap();
    let cut = || end_sessions(&admin, "lab");
    let attempts = || s.campaigns().unwrap().first().map(|c| s.attempts(&c.id).unwrap().len()).unwrap_or(0);
    wait_until("the first attempt is recorded", || attempts() >= 1);
    // This test's own store is one of them; `lab run`'s are the others.
    assert!(cut() >= 2, "no connection of lab run's to cut");
    wait_until("an attempt after the cut", || attempts() >= 3);
    cut();
    let (code, out) = finish(run);
    assert_eq!(code, 0, "{out}");
    let id = s.campaigns().unwrap()[0].id.clone();
    let recorded = s.attempts(&id).unwrap();
    let keys: Vec<(u32, u32)> = recorded.iter().map(|a| (a.trial_idx, a.attempt)).collect();
    assert_eq!(keys, [(0, 0), (1, 0), (2, 0), (3, 0)], "{out}");
    assert!(recorded.iter().all(|a| a.status == lab::store::AttemptStatus::Valid));
    assert_eq!(s.campaign(&id).unwrap().status, lab::store::CampaignStatus::Done);
}

/// The session that holds a device's lease ends while its campaign soaks (the server
/// ended it, as on a restart or a network cut that outlasted the keepalives): the worker
/// is told at once, stops its attempt as on Ctrl-C (the app stopped, nothing recorded),
/// frees the device and exits 3 saying so; `--resume` runs the trial later.
#[test_needs::needs(postgres)]
#[test]
fn a_holder_whose_lease_session_ends_stops_at_once_and_its_trial_waits_for_resume() {
    let url = common::fresh_postgres_database();
    let lab = TempLab::on_postgres(&url);
    let log = lab.dir.path().join("soaks.log");
    let rb = runbook_logging_to(&lab, "lost", "15s", 1, &log);
    let s = store(&url);
    let run = spawn(&lab, &["run", rb.to_str().unwrap()]);
    wait_until("the app soaks", || runs(&log).len() == 1);
    let admin = lab::store::PgOwner::connect(&PgUrl::parse(&url).unwrap()).unwrap();
    assert_eq!(end_lock_holders(&admin), 1, "one lease session");
    let cut = Instant::now();
    let (code, out) = finish(run);
    // The soak was 15 s: the worker stopped on the loss, not at the soak's end.
    assert!(cut.elapsed() < Duration::from_secs(10), "stopped {:?} after the loss", cut.elapsed());
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("its lease in the store was lost"), "{out}");
    let app = runs(&log)[0].3;
    assert!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(app), None).is_err(),
        "the app still runs after its worker stopped"
    );
    let id = s.campaigns().unwrap()[0].id.clone();
    assert!(s.attempts(&id).unwrap().is_empty(), "an attempt of a lost lease was recorded");
    assert!(s.lease_holder("this-host").unwrap().is_none(), "the device is still held");

    let out = lab.cmd(&["run", "--resume", &id]).timeout(Duration::from_secs(120)).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let keys: Vec<(u32, u32)> = s.attempts(&id).unwrap().iter().map(|a| (a.trial_idx, a.attempt)).collect();
    assert_eq!(keys, [(0, 0)]);
}
