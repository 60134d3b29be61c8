//! The tests of `Store`'s own operations (campaigns, attempts, devices), on SQLite
//! and, where `on_both!` says, PostgreSQL.

use super::*;
use crate::measure::{Measurement, Series, UntetherMode};
use crate::store::backend::{WAL_CHECKPOINT_PAGES, vals};
use crate::store::records::*;
use crate::store::{MIGRATIONS, ProcessId};

fn trial(idx: u32) -> PlannedTrialRow {
    PlannedTrialRow {
        idx,
        key: format!("{idx:04}-dev-a-r0"),
        device: "dev".into(),
        device_model: "M".into(),
        variant: "a".into(),
        build: "a".into(),
        config: "default".into(),
        repeat: 0,
        block: idx,
        device_order: idx,
    }
}

crate::testing::postgres::on_both!(
    a_campaign_lives_its_life_the_same_on_both_backends,
    attempts_recorded_at_once_by_two_writers_keep_their_rows_in_their_ranges,
    the_data_version_moves_when_another_connection_writes,
    an_attempt_refused_on_its_own_fails_alone_in_its_batch,
    recording_an_attempt_ends_its_in_flight_row_in_the_same_transaction,
    events_appended_at_once_by_two_writers_are_numbered_once_each_in_order,
    a_status_row_stamped_before_the_stored_one_does_not_replace_it,
    claimable_campaigns_are_those_with_pending_trials_on_the_devices_but_the_known,
);

/// An agent's look: the submitted campaigns with pending trials on its devices, first to
/// run first, leaving out those it names (it runs them or refused them), and none whose
/// trials are all done.
fn claimable_campaigns_are_those_with_pending_trials_on_the_devices_but_the_known(s: &Store) {
    for (id, priority) in [("c-low", 0), ("c-high", 5), ("c-done", 9)] {
        s.submit_campaign(&campaign(id, 2), 3, priority).unwrap();
    }
    s.record_attempt(attempt("c-done", 0, 1, true)).unwrap();
    s.record_attempt(attempt("c-done", 1, 1, true)).unwrap();
    let ids = |known: &[&str], devices: &[&str]| -> Vec<(String, Vec<String>)> {
        let known: Vec<String> = known.iter().map(|k| k.to_string()).collect();
        let devices: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
        s.claimable(&devices, &known).unwrap().into_iter().map(|c| (c.campaign, c.devices)).collect()
    };
    let dev = || vec!["dev".to_string()];
    assert_eq!(ids(&[], &["dev"]), vec![("c-high".into(), dev()), ("c-low".into(), dev())]);
    assert_eq!(ids(&["c-high"], &["dev", "other"]), vec![("c-low".into(), dev())]);
    assert_eq!(ids(&["c-high", "c-low"], &["dev"]), vec![]);
    assert_eq!(ids(&[], &["other"]), vec![]);
}

/// A worker writes its device's last state after letting the device go, stamped before: the
/// next holder's row, stamped later but perhaps written first, stays.
fn a_status_row_stamped_before_the_stored_one_does_not_replace_it(s: &Store) {
    let row = |state: &str, at: &str| DeviceStatusRow {
        device: "dev".into(),
        state: state.into(),
        battery_pct: None,
        campaign: Some("c-2".into()),
        trial_key: None,
        phase: None,
        updated_at: at.into(),
    };
    s.set_device_statuses(&[row("busy", "2026-12-07T07:00:00.200Z")]).unwrap();
    s.set_device_statuses(&[row("idle", "2026-12-07T07:00:00.100Z")]).unwrap();
    assert_eq!(s.device_statuses().unwrap()[0].state, "busy", "the older row is not written");
    s.set_device_statuses(&[row("idle", "2026-12-07T07:00:00.300Z")]).unwrap();
    assert_eq!(s.device_statuses().unwrap()[0].state, "idle");
}

/// Two handles (two agents) append bursts to one campaign's events at once: the numbers
/// run 1, 2, 3… with no gap and none twice, and each writer's events keep its order.
fn events_appended_at_once_by_two_writers_are_numbered_once_each_in_order(s: &Store) {
    let other = other_handle(s);
    let writers: Vec<_> = [(s.clone(), "a"), (other, "b")]
        .into_iter()
        .map(|(st, who)| {
            std::thread::spawn(move || {
                for burst in 0..30 {
                    let events: Vec<String> = (0..3).map(|k| format!("{who}{:03}", burst * 3 + k)).collect();
                    st.append_events("c-1", "t", &events).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let all = s.events_after("c-1", 0, 1000).unwrap();
    assert_eq!(all.iter().map(|(n, _)| *n).collect::<Vec<_>>(), (1..=180).collect::<Vec<i64>>());
    for who in ["a", "b"] {
        let mine: Vec<&String> = all.iter().map(|(_, e)| e).filter(|e| e.starts_with(who)).collect();
        assert_eq!(mine.len(), 90);
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "{who}'s events out of order");
    }
    assert_eq!(s.events_after("c-1", 178, 10).unwrap().len(), 2);
}

/// An agent's attempt is in `attempts_in_flight` from its start until it is recorded: the
/// recording removes the row (in its own transaction), and leaves the others' rows.
fn recording_an_attempt_ends_its_in_flight_row_in_the_same_transaction(s: &Store) {
    s.create_campaign(&campaign("c-1", 4), 2, 1).unwrap();
    for idx in [0, 1] {
        s.begin_attempt(&crate::store::InFlight {
            campaign: "c-1".into(),
            trial_idx: idx,
            attempt: 0,
            device: "dev".into(),
            host: "h1".into(),
            pid: 7,
            started_at: "s".into(),
            artifact_dir: format!("c-1/t{idx}.attempt-0"),
        })
        .unwrap();
    }
    let flying = |s: &Store| s.in_flight_on("dev").unwrap().into_iter().map(|(f, _)| f.trial_idx).collect::<Vec<_>>();
    assert_eq!(flying(s), [0, 1]);
    s.record_attempt(attempt("c-1", 0, 0, true)).unwrap();
    s.record_attempt(attempt("c-1", 2, 0, true)).unwrap();
    assert_eq!(flying(s), [1], "trial 0 recorded, trial 1 still in flight, trial 2 never was");
}

/// One transaction records a batch: an attempt of a trial never planned, and one
/// recorded twice, are refused alone; the others are recorded with all their rows.
fn an_attempt_refused_on_its_own_fails_alone_in_its_batch(s: &Store) {
    s.create_campaign(&campaign("c-1", 4), 2, 1).unwrap();
    s.record_attempt(attempt("c-1", 1, 0, true)).unwrap();
    let batch = vec![
        attempt("c-1", 0, 0, true),
        attempt("c-1", 99, 0, true),
        attempt("c-1", 1, 0, true),
        attempt("c-1", 2, 0, false),
        attempt("c-1", 2, 0, false),
    ];
    let results = s.record_attempts(batch);
    assert!(results[0].is_ok() && results[3].is_ok(), "{results:?}");
    assert!(results[1].is_err(), "a trial not planned: {results:?}");
    assert!(matches!(results[2], Err(StoreError::Duplicate { trial: 1, .. })), "{results:?}");
    assert!(matches!(results[4], Err(StoreError::Duplicate { trial: 2, .. })), "{results:?}");
    let stored = s.attempts("c-1").unwrap();
    let keys: Vec<u32> = stored.iter().map(|a| a.trial_idx).collect();
    assert_eq!(keys, [0, 1, 2]);
    let want = attempt("c-1", 2, 0, false);
    assert_eq!(stored[2].measurements, want.measurements);
    assert_eq!(stored[2].series, want.series);
    let cols = s.read_columns("c-1").unwrap();
    assert_eq!(cols.m_value.len(), stored.iter().map(|a| a.measurements.len()).sum::<usize>());
}

/// A second handle on the same store: another process, as `lab status --watch` sees it.
pub(crate) fn other_handle(s: &Store) -> Store {
    match &s.db {
        crate::store::backend::Db::Sqlite(_) => Store::open(s.location().sqlite_file().unwrap()).unwrap(),
        crate::store::backend::Db::Postgres(owner) => Store::open_postgres(owner.url()).unwrap(),
    }
}

fn the_data_version_moves_when_another_connection_writes(s: &Store) {
    let writer = other_handle(s);
    let v0 = s.data_version().unwrap();
    // Reads move it on neither backend.
    writer.campaigns().unwrap();
    s.campaigns().unwrap();
    assert_eq!(s.data_version().unwrap(), v0, "reads only");
    if let crate::store::backend::Db::Postgres(_) = &s.db {
        // Another database of the same server (another lab's store) is not this one.
        let url = crate::store::PgUrl::parse(&crate::testing::postgres::fresh_database()).unwrap();
        Store::open_postgres(&url).unwrap().create_campaign(&campaign("c-9", 2), 2, 1).unwrap();
        assert_eq!(s.data_version().unwrap(), v0, "a write in another database");
    }
    writer.create_campaign(&campaign("c-1", 2), 2, 1).unwrap();
    let v1 = s.data_version().unwrap();
    assert_ne!(v1, v0, "another connection's write");
    assert_eq!(s.data_version().unwrap(), v1, "nothing since");
}

/// Two handles (two connections, as two processes have) record attempts at once: every
/// attempt is there once, with its measurements and series in the id ranges its
/// `attempt_report` row gives, and a second recording of one is refused.
fn attempts_recorded_at_once_by_two_writers_keep_their_rows_in_their_ranges(s: &Store) {
    s.create_campaign(&campaign("c-1", 40), 2, 1).unwrap();
    let other = other_handle(s);
    let writers: Vec<_> = [(s.clone(), 0..20), (other, 20..40)]
        .into_iter()
        .map(|(st, range)| {
            std::thread::spawn(move || {
                for idx in range {
                    let mut a = attempt("c-1", idx, 0, idx % 3 != 0);
                    a.attestations = vec![Attestation {
                        step: "unplug".into(),
                        when: "untether".into(),
                        text: "unplug it".into(),
                        by: "op".into(),
                        at: "t".into(),
                        values: Default::default(),
                    }];
                    st.record_attempt(a).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let e = s.record_attempt(attempt("c-1", 5, 0, true)).unwrap_err();
    assert!(matches!(e, StoreError::Duplicate { trial: 5, .. }), "{e}");
    let counts = s.outcome_counts("c-1").unwrap();
    assert_eq!((counts.valid, counts.failed, counts.pending, counts.attempts), (26, 0, 14, 40));
    let ranges =
        s.db.call(|c| {
            c.query(
                "SELECT r.trial_idx,
                    (SELECT count(*) FROM measurements m WHERE m.id BETWEEN r.measurements_from AND r.measurements_to
                       AND m.campaign = r.campaign AND m.trial_idx = r.trial_idx AND m.attempt = r.attempt),
                    r.measurements_to - r.measurements_from + 1,
                    (SELECT count(*) FROM series x WHERE x.id BETWEEN r.series_from AND r.series_to
                       AND x.campaign = r.campaign AND x.trial_idx = r.trial_idx AND x.attempt = r.attempt),
                    r.series_to - r.series_from + 1,
                    (SELECT count(*) FROM attestations t WHERE t.campaign = r.campaign AND t.trial_idx = r.trial_idx)
                 FROM attempt_report r ORDER BY r.trial_idx",
                &[],
            )
        })
        .unwrap();
    assert_eq!(ranges.len(), 40);
    for r in &ranges {
        let got: Vec<i64> = (1..6).map(|i| r.get(i).unwrap()).collect();
        assert_eq!(got, [2, 2, 2, 2, 1], "trial {}: its rows, in its ranges only", r.get::<i64>(0).unwrap());
    }
}

/// What `lab run` and `lab status` do to a campaign, short of recording attempts
/// (inserted here as rows): create, read back, count, move, add trials, finish.
fn a_campaign_lives_its_life_the_same_on_both_backends(s: &Store) {
    let mut c = campaign("c-1", 3);
    c.planned_trials[2].device = "dev-b".into();
    s.create_campaign(&c, 2, std::process::id()).unwrap();
    assert!(s.create_campaign(&c, 2, 1).is_err(), "an id is taken once");
    let back = s.campaign("c-1").unwrap();
    assert_eq!(
        (back.seed, back.plan_json.clone(), back.status),
        (u64::MAX, serde_json::json!({"x": 1}), CampaignStatus::Running)
    );
    assert!(back.runner().is_some_and(|p| p.alive()));
    assert_eq!(s.campaign_without_plan("c-1").unwrap().plan_json, serde_json::Value::Null);
    assert_eq!(s.campaign_head("c-1").unwrap().1, r#"{"x":1}"#);
    assert!(matches!(s.campaign("nope"), Err(StoreError::NoCampaign(_))));
    assert_eq!(s.latest_campaign_id().unwrap().as_deref(), Some("c-1"));
    assert!(s.free_campaign_id("c").unwrap().starts_with("c-20"));
    // Attempt rows as the recorder writes them: trial 0 valid, trial 1 invalid twice.
    for (idx, attempt, status) in [(0, 0, "valid"), (1, 0, "invalid"), (1, 1, "invalid")] {
        s.db.call(move |c| {
            c.execute(
                "INSERT INTO attempts (campaign, trial_idx, attempt, status, reasons, phases, started_at, ended_at,
                    soak_start_s, artifact_dir, state_before, state_after)
                 VALUES ('c-1', ?1, ?2, ?3, '[]', '[]', 't', 't', 0.5, 'a', '{}', '{}')",
                &vals![idx, attempt, status],
            )
        })
        .unwrap();
    }
    let outcomes: Vec<_> = s.trials("c-1").unwrap().iter().map(|t| (t.row.idx, t.attempts, t.outcome)).collect();
    assert_eq!(outcomes, [(0, 1, TrialOutcome::Valid), (1, 2, TrialOutcome::Failed), (2, 0, TrialOutcome::Pending)]);
    let counts = s.outcome_counts("c-1").unwrap();
    assert_eq!((counts.valid, counts.failed, counts.pending, counts.attempts), (1, 1, 1, 3));
    let queue = s.pending_queue("c-1").unwrap();
    assert_eq!(
        queue.iter().map(|q| (q.device.as_str(), q.planned, q.done)).collect::<Vec<_>>(),
        [("dev", 2, 2), ("dev-b", 1, 0)]
    );
    assert_eq!(queue[1].pending, [(2, 0)]);
    let moves = [
        TrialMove { trial_idx: 2, to_device: "dev".into(), device_order: 9 },
        TrialMove { trial_idx: 0, to_device: "dev-b".into(), device_order: 9 },
    ];
    assert_eq!(s.move_trials("c-1", &moves).unwrap(), 1, "a trial with a valid attempt stays");
    assert_eq!(s.moved_trials("c-1").unwrap(), [(2, "dev-b".to_string())]);
    s.add_trials("c-1", &[trial(3)], r#"{"x":2}"#).unwrap();
    assert_eq!(s.trials("c-1").unwrap().len(), 4);
    assert!(matches!(s.add_trials("nope", &[trial(4)], "{}"), Err(StoreError::NoCampaign(_))));
    s.finish_campaign("c-1", CampaignStatus::Done, "t9", Some("ok"), Some(&serde_json::json!({"cpu": 1}))).unwrap();
    let done = s.campaign_list().unwrap().remove(0);
    assert_eq!((done.status, done.note.as_deref(), done.runner_pid), (CampaignStatus::Done, Some("ok"), None));
    assert_eq!(done.footprint_json, Some(serde_json::json!({"cpu": 1})));
    s.set_running("c-1", 7).unwrap();
    assert!(matches!(s.set_running("nope", 7), Err(StoreError::NoCampaign(_))));
    let row = |state: &str, battery| DeviceStatusRow {
        device: "dev".into(),
        state: state.into(),
        battery_pct: battery,
        campaign: Some("c-1".into()),
        trial_key: None,
        phase: None,
        updated_at: "t".into(),
    };
    s.set_device_statuses(&[row("busy", Some(80.0))]).unwrap();
    s.set_device_statuses(&[row("idle", None)]).unwrap();
    let st = s.device_statuses().unwrap();
    assert_eq!(
        (st[0].state.as_str(), st[0].battery_pct),
        ("idle", Some(80.0)),
        "a row without a reading keeps the last"
    );
}

pub(crate) fn campaign(id: &str, n: u32) -> NewCampaign {
    NewCampaign {
        id: id.into(),
        runbook_name: "rb".into(),
        runbook_path: "rb.toml".into(),
        runbook_text: "name = 'rb'".into(),
        runbook_sha256: "00".into(),
        lab_text: String::new(),
        lab_sha256: "11".into(),
        content_hashes: serde_json::json!({}),
        tool_version: "0".into(),
        seed: u64::MAX,
        created_at: "2026-01-01T00:00:00.000Z".into(),
        planned_trials: (0..n).map(trial).collect(),
        plan_json: r#"{"x":1}"#.into(),
    }
}

/// A new PostgreSQL store with campaigns "a" and "b" of 150 trials, one attempt each (b's
/// odd trials invalid), recorded interleaved as two campaigns running at once leave them;
/// its statistics were gathered after the first two trials, as autovacuum does early on in
/// a new database, and are stale.
pub(crate) fn grown_postgres_store() -> Store {
    let url = crate::store::PgUrl::parse(&crate::testing::postgres::fresh_database()).unwrap();
    let s = Store::open_postgres(&url).unwrap();
    for id in ["a", "b"] {
        s.create_campaign(&campaign(id, 150), 3, 1).unwrap();
    }
    let record = |from: u32, to: u32| {
        let all: Vec<_> = (from..to).flat_map(|i| [attempt("a", i, 1, true), attempt("b", i, 1, i % 2 == 0)]).collect();
        assert!(s.record_attempts(all).into_iter().all(|r| r.is_ok()));
    };
    record(0, 2);
    s.db.call(|c| c.batch("ANALYZE")).unwrap();
    record(2, 150);
    s
}

/// PostgreSQL's plan for `sql` on store `s`, as `EXPLAIN` prints it, with an index scan
/// named as a bitmap one is ("Index Scan on TABLE_pkey") whichever it is.
pub(crate) fn plan_of(s: &Store, sql: &str) -> String {
    let sql = format!("EXPLAIN {sql}");
    let lines = s.db.call(move |c| c.query(&sql, &[])).unwrap();
    let text: Vec<String> = lines.iter().map(|r| r.get::<String>(0).unwrap()).collect();
    text.join("\n").replace("Index Scan using ", "Index Scan on ")
}

pub(crate) fn attempt(id: &str, idx: u32, n: u32, valid: bool) -> AttemptRecord {
    AttemptRecord {
        campaign: id.into(),
        trial_idx: idx,
        attempt: n,
        device: "dev".into(),
        status: if valid { AttemptStatus::Valid } else { AttemptStatus::Invalid },
        reasons: if valid { vec![] } else { vec!["app died during the soak".into()] },
        phases: vec![("soak".into(), 3600.0)],
        started_at: "s".into(),
        ended_at: "e".into(),
        soak_start_s: 1.5,
        artifact_dir: "d".into(),
        measurements: vec![
            Measurement::new("cpu_pct", 12.5, "%", "sim"),
            Measurement::new("memory_mb", 6.0, "MB", "sim"),
        ],
        series: vec![
            Series::new("battery_pct", "%", "sim", vec![(0.0, 100.0), (60.0, 1711.0 / 1715.0 * 100.0)]),
            Series::new("temp_c", "°C", "sim", vec![(0.0, 25.0 + idx as f64)]),
        ],
        state_before: serde_json::json!({"b": 1}),
        state_after: serde_json::Value::Null,
        state_soak: serde_json::Value::Null,
        untether: Some(UntetherMode::SoftUntethered),
        labels: vec!["charged on".into()],
        attestations: Vec::new(),
    }
}

#[test]
fn a_step_settles_on_one_answer_and_attestations_come_back_with_their_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 2), 2, 42).unwrap();
    let ask = |step: &str| NewStep {
        campaign: "c1".into(),
        device: "dev".into(),
        trial_key: Some("0000-dev-a-r0".into()),
        attempt: Some(0),
        step: step.into(),
        when: "before-trial".into(),
        text: "Set brightness".into(),
        attest: vec!["brightness".into()],
        asked_at: "t0".into(),
        deadline: "t1".into(),
    };
    let (a, b, c) = (s.ask_step(&ask("a")).unwrap(), s.ask_step(&ask("b")).unwrap(), s.ask_step(&ask("c")).unwrap());
    let values: serde_json::Map<_, _> = [("brightness".to_string(), serde_json::json!(50.0))].into_iter().collect();
    assert!(s.answer_step(a, "ana", "t0.5", &values).unwrap());
    assert!(!s.answer_step(a, "bo", "t0.6", &values).unwrap(), "the first answer wins");
    assert!(!s.close_step(a, StepStatus::Expired).unwrap(), "an answered step does not expire");
    assert!(s.close_step(b, StepStatus::Expired).unwrap());
    assert!(!s.answer_step(b, "ana", "t2", &values).unwrap(), "an expired step cannot be answered");
    assert_eq!(s.pending_steps(Some("c1")).unwrap().iter().map(|r| r.id).collect::<Vec<_>>(), [c]);
    assert_eq!(s.abandon_steps("c1").unwrap(), 1, "what a crashed runner left waiting");
    assert!(s.pending_steps(None).unwrap().is_empty());
    let got = s.step(a).unwrap().unwrap();
    assert_eq!(
        (got.status, got.answered_by.as_deref(), got.device.as_str()),
        (StepStatus::Answered, Some("ana"), "dev")
    );

    let attested = Attestation {
        step: "a".into(),
        when: "before-trial".into(),
        text: "Set brightness".into(),
        by: "ana".into(),
        at: "t0.5".into(),
        values,
    };
    s.record_attempt(AttemptRecord { attestations: vec![attested.clone()], ..attempt("c1", 0, 0, true) }).unwrap();
    s.record_attempt(attempt("c1", 1, 0, true)).unwrap();
    let attempts = s.attempts("c1").unwrap();
    assert_eq!((attempts[0].attestations.as_slice(), attempts[1].attestations.len()), (&[attested.clone()][..], 0));
    let latest = s.latest_attestations().unwrap();
    assert_eq!(latest, [("dev".to_string(), "c1".to_string(), attested)]);
}

#[test]
fn a_campaign_knows_when_its_runner_started_and_a_reused_pid_is_not_its_runner() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 1), 2, std::process::id()).unwrap();
    let runner = s.campaign("c1").unwrap().runner().unwrap();
    assert_eq!(runner, ProcessId::current());
    assert!(runner.alive());
    // The same pid, started at another time: the kernel's reuse of a dead runner's pid.
    s.lock().unwrap().execute("UPDATE campaigns SET runner_start = runner_start - 1", []).unwrap();
    assert!(!s.campaign("c1").unwrap().runner().unwrap().alive());
    s.set_running("c1", std::process::id()).unwrap();
    assert!(s.campaign("c1").unwrap().runner().unwrap().alive(), "a resume records its own start");
    s.finish_campaign("c1", CampaignStatus::Done, "t", None, None).unwrap();
    let c = s.campaign("c1").unwrap();
    assert_eq!((c.runner(), c.runner_start), (None, None));
}

#[test]
fn campaign_round_trip_outcomes_and_measurements() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("sub/lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 3), 2, 42).unwrap();
    let c = s.campaign("c1").unwrap();
    assert_eq!((c.status, c.runner_pid, c.seed), (CampaignStatus::Running, Some(42), u64::MAX));
    assert_eq!(c.plan_json, serde_json::json!({"x": 1}));

    s.record_attempt(attempt("c1", 0, 0, true)).unwrap();
    s.record_attempt(attempt("c1", 1, 0, false)).unwrap();
    s.record_attempt(attempt("c1", 1, 1, false)).unwrap();
    s.record_attempt(attempt("c1", 2, 0, false)).unwrap();
    let outcomes: Vec<_> = s.trials("c1").unwrap().iter().map(|t| (t.attempts, t.outcome)).collect();
    assert_eq!(outcomes, [(1, TrialOutcome::Valid), (2, TrialOutcome::Failed), (1, TrialOutcome::Pending)]);

    let attempts = s.attempts("c1").unwrap();
    assert_eq!(attempts.len(), 4);
    assert_eq!(attempts[0], attempt("c1", 0, 0, true));
    assert_eq!(attempts[2].measurements.len(), 2);
    assert_eq!(attempts[2].reasons, ["app died during the soak"]);
}

#[test]
fn added_trials_and_plan_are_stored_together() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 2), 2, 1).unwrap();
    s.record_attempt(attempt("c1", 0, 0, true)).unwrap();
    assert_eq!(s.campaign_head("c1").unwrap().1, r#"{"x":1}"#);
    s.add_trials("c1", &[trial(2), trial(3)], r#"{"x":2,"trials":[{"idx":2},{"idx":3}]}"#).unwrap();
    // The head goes with the plan, without its trials.
    assert_eq!(s.campaign_head("c1").unwrap().1, r#"{"x":2}"#);
    let outcomes: Vec<_> = s.trials("c1").unwrap().iter().map(|t| (t.row.idx, t.outcome)).collect();
    assert_eq!(
        outcomes,
        [(0, TrialOutcome::Valid), (1, TrialOutcome::Pending), (2, TrialOutcome::Pending), (3, TrialOutcome::Pending)]
    );
    assert_eq!(s.campaign("c1").unwrap().plan_json, serde_json::json!({"x": 2, "trials": [{"idx": 2}, {"idx": 3}]}));
    // A clash rolls the whole change back: the plan stays as it was.
    assert!(s.add_trials("c1", &[trial(4), trial(0)], r#"{"x":3}"#).is_err());
    assert_eq!(s.trials("c1").unwrap().len(), 4);
    assert_eq!(s.campaign("c1").unwrap().plan_json, serde_json::json!({"x": 2, "trials": [{"idx": 2}, {"idx": 3}]}));
    assert_eq!(s.campaign_head("c1").unwrap().1, r#"{"x":2}"#);
    assert!(matches!(s.add_trials("nope", &[], r#"{}"#), Err(StoreError::NoCampaign(_))));
}

#[test]
fn an_attempt_is_recorded_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 1), 3, 1).unwrap();
    s.record_attempt(attempt("c1", 0, 0, true)).unwrap();
    let e = s.record_attempt(attempt("c1", 0, 0, true)).unwrap_err();
    assert!(matches!(e, StoreError::Duplicate { trial: 0, attempt: 0, .. }), "{e}");
    assert_eq!(s.attempts("c1").unwrap()[0].measurements.len(), 2, "the duplicate added no measurements");
}

#[test]
fn attempts_recorded_from_many_threads_at_once_are_all_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 8 * 500), 3, 1).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..500 {
                    s.record_attempt(attempt("c1", t * 500 + i, 0, i % 3 != 0)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let attempts = s.attempts("c1").unwrap();
    assert_eq!(attempts.len(), 4000);
    assert!(attempts.iter().enumerate().all(|(i, a)| a.trial_idx == i as u32 && a.measurements.len() == 2));
    let c = s.outcome_counts("c1").unwrap();
    assert_eq!((c.valid, c.pending, c.attempts), (2664, 1336, 4000));
    let again = s.record_attempt(attempt("c1", 3999, 0, true)).unwrap_err();
    assert!(matches!(again, StoreError::Duplicate { trial: 3999, .. }), "{again}");
}

#[test]
fn a_duplicate_in_a_batch_fails_alone_and_its_neighbours_commit() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 3), 3, 1).unwrap();
    s.record_attempt(attempt("c1", 1, 0, true)).unwrap();
    // Three attempts queued together, the middle one already recorded: one transaction.
    let tickets = s.attempts.push_all([0, 1, 2].map(|i| EncodedAttempt::encode(attempt("c1", i, 0, false))).into());
    let mut conn = s.lock().unwrap();
    let Turn::Record(jobs) = s.attempts.turn(&tickets[0]) else { panic!("nobody else recorded them") };
    assert_eq!(jobs.len(), 3);
    assert_eq!(batch::record(&mut conn, jobs, insert_attempt), 1);
    drop(conn);
    let results: Vec<_> = tickets.iter().map(|t| t.lock().unwrap().take().unwrap()).collect();
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert!(matches!(results[1], Err(StoreError::Duplicate { trial: 1, attempt: 0, .. })), "{results:?}");
    let stored: Vec<_> = s.attempts("c1").unwrap().into_iter().map(|a| (a.trial_idx, a.status)).collect();
    assert_eq!(
        stored,
        [(0, AttemptStatus::Invalid), (1, AttemptStatus::Valid), (2, AttemptStatus::Invalid)],
        "the duplicate changed nothing of the attempt already there"
    );
    assert_eq!(s.series("c1").unwrap().len(), 6, "two series per attempt, none from the duplicate");
}

#[test]
fn the_store_checkpoints_its_log_every_8000_pages() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    let pages: i64 = s.lock().unwrap().query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0)).unwrap();
    assert_eq!(pages, WAL_CHECKPOINT_PAGES);
    // And the log does start over: 12 000 commits of a page each stay below 2 x 8 000 pages.
    s.lock().unwrap().execute_batch("CREATE TABLE t (v BLOB)").unwrap();
    let wal = dir.path().join("lab.db-wal");
    let mut largest = 0;
    for _ in 0..12_000 {
        s.lock().unwrap().execute("INSERT INTO t VALUES (zeroblob(3000))", []).unwrap();
        largest = largest.max(std::fs::metadata(&wal).unwrap().len());
    }
    assert!(largest < 2 * 8000 * 4200, "the log grew to {largest} bytes");
}

#[test]
fn an_attempt_that_fails_halfway_is_rolled_back_alone_and_its_neighbours_commit() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 4), 3, 1).unwrap();
    s.record_attempt(attempt("c1", 3, 0, true)).unwrap();
    // Trial 1's second measurement is NaN, which SQLite stores as NULL: its `attempts`
    // and `attempt_report` rows and first measurement are written before the NOT NULL
    // refuses it. Trial 3 is a duplicate.
    let mut broken = attempt("c1", 1, 0, true);
    broken.measurements[1].value = f64::NAN;
    let batch = vec![attempt("c1", 0, 0, true), broken, attempt("c1", 2, 0, false), attempt("c1", 3, 0, false)];
    let results = s.record_attempts(batch);
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert!(matches!(results[1], Err(StoreError::Sql(_))), "{results:?}");
    assert!(matches!(results[3], Err(StoreError::Duplicate { trial: 3, .. })), "{results:?}");
    assert_eq!(s.commits(), 2, "the first attempt's commit, then the batch's, done again with savepoints");
    let stored: Vec<_> = s.attempts("c1").unwrap().into_iter().map(|a| (a.trial_idx, a.measurements.len())).collect();
    assert_eq!(stored, [(0, 2), (2, 2), (3, 2)], "nothing of trial 1: no row, no measurement");
    let reports: u32 = s.lock().unwrap().query_row("SELECT count(*) FROM attempt_report", [], |r| r.get(0)).unwrap();
    assert_eq!(reports, 3);
    assert_eq!(s.series("c1").unwrap().len(), 6);
}

#[test]
fn record_attempts_gives_each_its_own_result_in_order_while_others_record_too() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 2000), 3, 1).unwrap();
    s.record_attempt(attempt("c1", 1, 0, true)).unwrap();
    // Threads recording one by one take the queue now and then, batches of ours in it.
    let others = {
        let s = s.clone();
        std::thread::spawn(move || {
            for i in 1000..2000 {
                s.record_attempt(attempt("c1", i, 0, true)).unwrap();
            }
        })
    };
    let mut results = Vec::new();
    for chunk in (0..1000u32).collect::<Vec<_>>().chunks(7) {
        results.extend(s.record_attempts(chunk.iter().map(|&i| attempt("c1", i, 0, i % 2 == 0)).collect()));
    }
    others.join().unwrap();
    assert_eq!(results.len(), 1000);
    for (i, r) in results.iter().enumerate() {
        if i == 1 {
            assert!(matches!(r, Err(StoreError::Duplicate { trial: 1, .. })), "{r:?}");
        } else {
            assert!(r.is_ok(), "{i}: {r:?}");
        }
    }
    assert_eq!(s.attempts("c1").unwrap().len(), 2000);
    assert!(s.record_attempts(Vec::new()).is_empty());
}

#[test]
fn pending_queue_gives_each_devices_pending_trials_in_queue_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    let mut c = campaign("c1", 5);
    for (i, t) in c.planned_trials.iter_mut().enumerate() {
        t.device = if i % 2 == 0 { "b".into() } else { "a".into() };
        t.device_order = 10 - i as u32;
    }
    s.create_campaign(&c, 2, 1).unwrap();
    s.record_attempt(attempt("c1", 0, 0, true)).unwrap();
    s.record_attempt(attempt("c1", 1, 0, false)).unwrap();
    s.record_attempt(attempt("c1", 2, 0, false)).unwrap();
    s.record_attempt(attempt("c1", 2, 1, false)).unwrap();
    let got = s.pending_queue("c1").unwrap();
    let want = [
        DeviceQueue { device: "a".into(), planned: 2, done: 0, pending: vec![(3, 0), (1, 1)] },
        DeviceQueue { device: "b".into(), planned: 3, done: 2, pending: vec![(4, 0)] },
    ];
    assert_eq!(got, want);
    assert_eq!(s.outcome_counts("c1").unwrap(), OutcomeCounts { valid: 1, failed: 1, pending: 3, attempts: 4 });
    assert!(matches!(s.pending_queue("nope"), Err(StoreError::NoCampaign(_))));
}

#[test]
fn add_trials_appends_in_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 2), 1, 1).unwrap();
    let plan = serde_json::json!({"x": 2});
    s.add_trials("c1", &[trial(2), trial(3)], &plan.to_string()).unwrap();
    assert_eq!(s.trials("c1").unwrap().len(), 4);
    assert_eq!(s.campaign("c1").unwrap().plan_json, plan);
    // A clash on the second row rolls back the first, and the plan with it.
    let e = s.add_trials("c1", &[trial(4), trial(0)], r#"{"x":3}"#).unwrap_err();
    assert!(matches!(e, StoreError::Sql(_)), "{e}");
    assert_eq!(s.trials("c1").unwrap().len(), 4);
    assert_eq!(s.campaign("c1").unwrap().plan_json, plan);
    assert!(matches!(s.add_trials("nope", &[trial(9)], &plan.to_string()), Err(StoreError::NoCampaign(_))));
}

#[test]
fn pending_trials_move_and_attempts_keep_their_device() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 3), 3, 1).unwrap();
    s.record_attempt(attempt("c1", 0, 0, true)).unwrap();
    s.record_attempt(attempt("c1", 1, 0, false)).unwrap();
    let moves: Vec<TrialMove> =
        (0..3).map(|i| TrialMove { trial_idx: i, to_device: "dev-2".into(), device_order: 10 + i }).collect();
    assert_eq!(s.move_trials("c1", &moves).unwrap(), 2, "the valid trial stays");
    let rows: Vec<_> = s.trials("c1").unwrap().into_iter().map(|t| (t.row.device, t.row.device_order)).collect();
    assert_eq!(rows, [("dev".into(), 0), ("dev-2".into(), 11), ("dev-2".into(), 12)]);
    assert_eq!(s.moved_trials("c1").unwrap(), [(1, "dev".to_string()), (2, "dev".to_string())]);
    // Moving again keeps the first planned device.
    s.move_trials("c1", &[TrialMove { trial_idx: 2, to_device: "dev-3".into(), device_order: 0 }]).unwrap();
    assert_eq!(s.moved_trials("c1").unwrap()[1], (2, "dev".to_string()));
    let mut on_2 = attempt("c1", 1, 1, true);
    on_2.device = "dev-2".into();
    s.record_attempt(on_2).unwrap();
    let devices: Vec<_> = s.attempts("c1").unwrap().into_iter().map(|a| a.device).collect();
    assert_eq!(devices, ["dev", "dev", "dev-2"], "each attempt says where it ran");
}

#[test]
fn a_version_1_store_is_migrated_with_each_attempts_device() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lab.db");
    {
        let conn = crate::store::schema::open_at_version(&path, 1);
        conn.execute_batch(
            "INSERT INTO campaigns VALUES ('old','rb','rb.toml','','','','','{}','0',1,'t',NULL,'done',NULL,NULL,'{}',NULL,3);
             INSERT INTO trials VALUES ('old',0,'0000-phone-a-r0','phone','M','a','a','default',0,0,0);
             INSERT INTO attempts VALUES ('old',0,0,'valid','[]','[]','s','e',0,'d','{}','{}');",
        )
        .unwrap();
    }
    let s = Store::open(&path).unwrap();
    let a = s.attempts("old").unwrap();
    assert_eq!(a[0].device, "phone");
    assert!(s.moved_trials("old").unwrap().is_empty());
}

#[test]
fn series_are_stored_with_their_attempt_and_read_per_campaign() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 2), 3, 1).unwrap();
    s.create_campaign(&campaign("c2", 1), 3, 1).unwrap();
    s.record_attempt(attempt("c1", 1, 0, false)).unwrap();
    s.record_attempt(AttemptRecord { series: Vec::new(), ..attempt("c1", 0, 0, true) }).unwrap();
    s.record_attempt(attempt("c2", 0, 0, true)).unwrap();
    let got: Vec<(u32, u32, String, f64)> = s
        .series("c1")
        .unwrap()
        .into_iter()
        .map(|r| (r.trial_idx, r.attempt, r.series.name, r.series.points[0].1))
        .collect();
    assert_eq!(got, [(1, 0, "battery_pct".into(), 100.0), (1, 0, "temp_c".into(), 26.0)]);
    let attempts = s.attempts("c1").unwrap();
    assert!(attempts[0].series.is_empty(), "an attempt without series has none");
    assert_eq!(attempts[1].series, attempt("c1", 1, 0, false).series, "points come back bit for bit");

    // A duplicate attempt adds no series either: the transaction is rolled back.
    assert!(s.record_attempt(attempt("c1", 1, 0, false)).is_err());
    assert_eq!(s.series("c1").unwrap().len(), 2);
}

#[test]
fn a_damaged_series_is_an_error_not_a_silent_gap() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("lab.db")).unwrap();
    s.create_campaign(&campaign("c1", 1), 3, 1).unwrap();
    s.record_attempt(attempt("c1", 0, 0, true)).unwrap();
    s.lock().unwrap().execute("UPDATE series SET points = x'0102' WHERE seq = 1", []).unwrap();
    let e = s.series("c1").unwrap_err();
    assert!(e.to_string().contains("2 bytes is not a whole number of 16-byte"), "{e}");
    assert!(s.attempts("c1").is_err());
}

#[test]
fn a_version_2_store_gains_series_and_its_attempts_have_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lab.db");
    {
        let conn = crate::store::schema::open_at_version(&path, 2);
        conn.execute_batch(
            "INSERT INTO campaigns VALUES ('old','rb','rb.toml','','','','','{}','0',1,'t',NULL,'done',NULL,NULL,'{}',NULL,3);
             INSERT INTO trials VALUES ('old',0,'0000-phone-a-r0','phone','M','a','a','default',0,0,0,NULL);
             INSERT INTO attempts VALUES ('old',0,0,'valid','[]','[]','s','e',0,'d','{}','{}','phone');
             INSERT INTO measurements VALUES ('old',0,0,0,'cpu_pct',1.5,'%','sim');",
        )
        .unwrap();
    }
    let s = Store::open(&path).unwrap();
    let version: u32 = s.lock().unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, MIGRATIONS.len() as u32);
    let a = s.attempts("old").unwrap();
    assert_eq!((a.len(), a[0].measurements.len(), a[0].series.len()), (1, 1, 0));
    assert_eq!((a[0].untether, a[0].labels.len()), (None, 0), "attempts from before schema 4 have no untether mode");
    assert!(s.series("old").unwrap().is_empty());
    // The migrated store keeps series of attempts recorded from now on.
    s.create_campaign(&campaign("new", 1), 3, 1).unwrap();
    s.record_attempt(attempt("new", 0, 0, true)).unwrap();
    assert_eq!(s.attempts("new").unwrap()[0], attempt("new", 0, 0, true));
}

#[test]
fn finish_resume_and_device_status() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lab.db");
    let s = Store::open(&path).unwrap();
    s.create_campaign(&campaign("c1", 1), 3, 1).unwrap();
    s.finish_campaign("c1", CampaignStatus::Interrupted, "t", Some("stopped by the user"), None).unwrap();
    let c = s.campaign("c1").unwrap();
    assert_eq!(
        (c.status, c.runner_pid, c.note.as_deref()),
        (CampaignStatus::Interrupted, None, Some("stopped by the user"))
    );
    s.set_running("c1", 7).unwrap();
    assert_eq!(s.campaign("c1").unwrap().status, CampaignStatus::Running);
    assert!(matches!(s.set_running("nope", 1), Err(StoreError::NoCampaign(_))));

    let row = DeviceStatusRow {
        device: "d".into(),
        state: "busy".into(),
        battery_pct: Some(80.0),
        campaign: Some("c1".into()),
        trial_key: Some("k".into()),
        phase: Some("soak".into()),
        updated_at: "t".into(),
    };
    s.set_device_status(&row).unwrap();
    // A later row without a battery reading keeps the last known level.
    s.set_device_status(&DeviceStatusRow { battery_pct: None, state: "idle".into(), ..row.clone() }).unwrap();
    let got = s.device_statuses().unwrap();
    assert_eq!((got[0].state.as_str(), got[0].battery_pct), ("idle", Some(80.0)));

    // Reopening runs no migration twice and keeps the data.
    drop(s);
    let s = Store::open_existing(&path).unwrap();
    assert_eq!(s.campaigns().unwrap().len(), 1);
    assert!(matches!(Store::open_existing(&dir.path().join("none.db")), Err(StoreError::Missing { .. })));
}
