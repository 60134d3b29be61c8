//! Schema and migrations. Each migration runs once, in order, inside a transaction;
//! `PRAGMA user_version` records how far a database has come.

use rusqlite::Connection;

/// Migrations, oldest first. Never edit one that has shipped: add a new one.
pub const MIGRATIONS: &[&str] = &[
    // 1: campaigns, planned trials, attempts, measurements, device status.
    r#"
    CREATE TABLE campaigns (
        id              TEXT PRIMARY KEY,
        runbook_name    TEXT NOT NULL,
        runbook_path    TEXT NOT NULL,
        runbook_text    TEXT NOT NULL,
        runbook_sha256  TEXT NOT NULL,
        lab_text        TEXT NOT NULL,
        lab_sha256      TEXT NOT NULL,
        content_hashes  TEXT NOT NULL,
        tool_version    TEXT NOT NULL,
        seed            INTEGER NOT NULL,
        created_at      TEXT NOT NULL,
        finished_at     TEXT,
        status          TEXT NOT NULL,
        runner_pid      INTEGER,
        note            TEXT,
        plan_json       TEXT NOT NULL,
        footprint_json  TEXT,
        max_attempts    INTEGER NOT NULL
    );
    CREATE TABLE trials (
        campaign        TEXT NOT NULL REFERENCES campaigns(id),
        idx             INTEGER NOT NULL,
        key             TEXT NOT NULL,
        device          TEXT NOT NULL,
        device_model    TEXT NOT NULL,
        variant         TEXT NOT NULL,
        build           TEXT NOT NULL,
        config          TEXT NOT NULL,
        repeat          INTEGER NOT NULL,
        block           INTEGER NOT NULL,
        device_order    INTEGER NOT NULL,
        PRIMARY KEY (campaign, idx)
    );
    CREATE TABLE attempts (
        campaign        TEXT NOT NULL,
        trial_idx       INTEGER NOT NULL,
        attempt         INTEGER NOT NULL,
        status          TEXT NOT NULL,
        reasons         TEXT NOT NULL,
        phases          TEXT NOT NULL,
        started_at      TEXT NOT NULL,
        ended_at        TEXT NOT NULL,
        soak_start_s    REAL NOT NULL,
        artifact_dir    TEXT NOT NULL,
        state_before    TEXT NOT NULL,
        state_after     TEXT NOT NULL,
        PRIMARY KEY (campaign, trial_idx, attempt),
        FOREIGN KEY (campaign, trial_idx) REFERENCES trials(campaign, idx)
    );
    CREATE TABLE measurements (
        campaign        TEXT NOT NULL,
        trial_idx       INTEGER NOT NULL,
        attempt         INTEGER NOT NULL,
        seq             INTEGER NOT NULL,
        metric          TEXT NOT NULL,
        value           REAL NOT NULL,
        unit            TEXT NOT NULL,
        source          TEXT NOT NULL,
        PRIMARY KEY (campaign, trial_idx, attempt, seq),
        FOREIGN KEY (campaign, trial_idx, attempt) REFERENCES attempts(campaign, trial_idx, attempt)
    );
    CREATE TABLE device_status (
        device          TEXT PRIMARY KEY,
        state           TEXT NOT NULL,
        battery_pct     REAL,
        campaign        TEXT,
        trial_key       TEXT,
        phase           TEXT,
        updated_at      TEXT NOT NULL
    );
    "#,
    // 2: the device each attempt really ran on (trials can move to another device of
    // their model when theirs is lost), and where a moved trial was first planned.
    r#"
    ALTER TABLE attempts ADD COLUMN device TEXT;
    ALTER TABLE trials ADD COLUMN moved_from TEXT;
    UPDATE attempts SET device = (
        SELECT t.device FROM trials t WHERE t.campaign = attempts.campaign AND t.idx = attempts.trial_idx
    );
    "#,
    // 3: values over an attempt's time (the battery level), kept at collect time so that
    // reports read no raw files. `points`: (seconds since launch, value) pairs of
    // little-endian f64, 16 bytes a point (`measure::Series::points_blob`). Attempts
    // recorded before have none.
    r#"
    CREATE TABLE series (
        campaign        TEXT NOT NULL,
        trial_idx       INTEGER NOT NULL,
        attempt         INTEGER NOT NULL,
        seq             INTEGER NOT NULL,
        name            TEXT NOT NULL,
        unit            TEXT NOT NULL,
        source          TEXT NOT NULL,
        points          BLOB NOT NULL,
        PRIMARY KEY (campaign, trial_idx, attempt, seq),
        FOREIGN KEY (campaign, trial_idx, attempt) REFERENCES attempts(campaign, trial_idx, attempt)
    );
    "#,
    // 4: how each attempt was untethered (`measure::UntetherMode`; NULL for attempts recorded
    // before) and its labels (JSON array: what a valid attempt's figures need said with them,
    // e.g. that a soft-untethered phone charged on).
    r#"
    ALTER TABLE attempts ADD COLUMN untether TEXT;
    ALTER TABLE attempts ADD COLUMN labels TEXT NOT NULL DEFAULT '[]';
    "#,
    // 5: operator steps. `operator_steps` is the live desk: a runner asks (pending), an
    // operator answers from any terminal (`lab confirm`), or the deadline passes (expired).
    // `attestations` is what an answer attested, kept with the attempt it belongs to and
    // written in the attempt's own transaction.
    r#"
    CREATE TABLE operator_steps (
        id              INTEGER PRIMARY KEY,
        campaign        TEXT NOT NULL REFERENCES campaigns(id),
        device          TEXT NOT NULL,
        trial_key       TEXT,
        attempt         INTEGER,
        step            TEXT NOT NULL,
        step_when       TEXT NOT NULL,
        text            TEXT NOT NULL,
        attest          TEXT NOT NULL,
        asked_at        TEXT NOT NULL,
        deadline        TEXT NOT NULL,
        status          TEXT NOT NULL,
        answered_at     TEXT,
        answered_by     TEXT,
        answer          TEXT
    );
    CREATE INDEX operator_steps_pending ON operator_steps (campaign, status);
    CREATE TABLE attestations (
        campaign        TEXT NOT NULL,
        trial_idx       INTEGER NOT NULL,
        attempt         INTEGER NOT NULL,
        seq             INTEGER NOT NULL,
        step            TEXT NOT NULL,
        step_when       TEXT NOT NULL,
        text            TEXT NOT NULL,
        answered_by     TEXT NOT NULL,
        answered_at     TEXT NOT NULL,
        answer          TEXT NOT NULL,
        PRIMARY KEY (campaign, trial_idx, attempt, seq),
        FOREIGN KEY (campaign, trial_idx, attempt) REFERENCES attempts(campaign, trial_idx, attempt)
    );
    "#,
    // 6 (care): a device's battery as read between campaigns (`lab care`), for the health
    // and cycle trends of `lab status`. `at`: RFC 3339 UTC; health and cycles NULL where
    // the platform does not say.
    r#"
    CREATE TABLE battery_readings (
        device          TEXT NOT NULL,
        at              TEXT NOT NULL,
        battery_pct     REAL,
        health_pct      REAL,
        cycle_count     INTEGER,
        source          TEXT NOT NULL
    );
    CREATE INDEX battery_readings_by_device ON battery_readings (device, at);
    "#,
    // 7 (app state): what the device's own log says about the soak (an iPhone's powerlog:
    // brightness, Bluetooth), as a state snapshot's JSON; NULL where the device keeps no log.
    r#"
    ALTER TABLE attempts ADD COLUMN state_soak TEXT;
    "#,
    // 8 (schedules): one row per (schedule, due time), the UTC instant croner gave, written
    // `YYYY-MM-DDTHH:MM:SSZ` so text order is time order. A runner owns a slot by inserting
    // its row (claimed); a skipped slot is a row too, so nothing is passed over unsaid.
    // state: claimed | interrupted | finished | skipped. `schedules_seen`: when a runner
    // first saw each schedule, where counting starts before it has a slot.
    r#"
    CREATE TABLE schedule_slots (
        schedule        TEXT NOT NULL,
        due_utc         TEXT NOT NULL,
        state           TEXT NOT NULL,
        claimed_at      TEXT,
        claimed_pid     INTEGER,
        claimed_host    TEXT,
        campaign        TEXT,
        finished_at     TEXT,
        outcome         TEXT,
        skipped_because TEXT,
        UNIQUE (schedule, due_utc)
    );
    CREATE TABLE schedules_seen (
        schedule        TEXT PRIMARY KEY,
        first_seen_utc  TEXT NOT NULL
    );
    "#,
    // 9 (history, review, alerts). `campaign_summaries`: one row per campaign × model ×
    // variant × metric (a report's `MetricRow`), kept so that history and reviews read no
    // measurements; `vals` is the row's values, f64 little-endian in trial order, and a
    // `summary_version` below `stats::SUMMARY_VERSION` means "recompute". `schedule_findings`:
    // what a slot's review found per model × variant × gating metric, and how its
    // confirmation came out. `schedule_alerts`: one per slot and channel (webhook | command),
    // state sending | sent | failed; the unique key makes delivery at-least-once, once per slot.
    r#"
    CREATE TABLE campaign_summaries (
        campaign        TEXT NOT NULL REFERENCES campaigns(id),
        model           TEXT NOT NULL,
        variant         TEXT NOT NULL,
        metric          TEXT NOT NULL,
        build           TEXT NOT NULL,
        config          TEXT NOT NULL,
        build_sha256    TEXT,
        devices         TEXT NOT NULL,
        unit            TEXT NOT NULL,
        sources         TEXT NOT NULL,
        gating          INTEGER NOT NULL,
        n               INTEGER NOT NULL,
        non_finite      INTEGER NOT NULL,
        mean            REAL,
        ci_low          REAL,
        ci_high         REAL,
        confidence      REAL NOT NULL,
        summary         TEXT,
        vals            BLOB NOT NULL,
        summary_version INTEGER NOT NULL,
        PRIMARY KEY (campaign, model, variant, metric)
    );
    CREATE TABLE schedule_findings (
        id              INTEGER PRIMARY KEY,
        schedule        TEXT NOT NULL,
        due_utc         TEXT NOT NULL,
        campaign        TEXT NOT NULL,
        model           TEXT NOT NULL,
        variant         TEXT NOT NULL,
        metric          TEXT NOT NULL,
        direction       TEXT NOT NULL,
        by_verdict      INTEGER NOT NULL,
        change_point    TEXT,
        baseline        TEXT NOT NULL,
        screen          TEXT NOT NULL,
        state           TEXT NOT NULL,
        confirm_campaign TEXT,
        confirm         TEXT,
        decided_at      TEXT,
        note            TEXT,
        UNIQUE (schedule, due_utc, model, variant, metric)
    );
    CREATE TABLE schedule_alerts (
        schedule        TEXT NOT NULL,
        due_utc         TEXT NOT NULL,
        channel         TEXT NOT NULL,
        target          TEXT NOT NULL,
        payload         TEXT NOT NULL,
        state           TEXT NOT NULL,
        tries           INTEGER NOT NULL,
        response        TEXT,
        error           TEXT,
        at              TEXT NOT NULL,
        UNIQUE (schedule, due_utc, channel)
    );
    "#,
    // 10: `attempt_report`, what a report reads of each attempt, narrow and in key order
    // (WITHOUT ROWID), written with the attempt: an attempts row is about 2 KB, mostly its
    // state JSON, so reading 144 000 of them is reading 300 MB. `state_digest` holds the
    // known readings a report shows from the three state snapshots
    // (`StateDigest::to_blob`); NULL for attempts recorded before, whose JSON is read.
    r#"
    CREATE TABLE attempt_report (
        campaign        TEXT NOT NULL,
        trial_idx       INTEGER NOT NULL,
        attempt         INTEGER NOT NULL,
        status          TEXT NOT NULL,
        device          TEXT,
        untether        TEXT,
        soak_start_s    REAL NOT NULL,
        phases          TEXT NOT NULL,
        reasons         TEXT NOT NULL,
        labels          TEXT NOT NULL,
        state_digest    BLOB,
        PRIMARY KEY (campaign, trial_idx, attempt)
    ) WITHOUT ROWID;
    INSERT INTO attempt_report
        SELECT campaign, trial_idx, attempt, status, device, untether, soak_start_s, phases, reasons, labels, NULL
        FROM attempts;
    "#,
    // 11: `plan_head`, the plan without its `trials`, written with `plan_json`
    // (`campaigns::plan_head`; here, once, by `json_remove`): a report needs only the head,
    // and the whole text of a plan of 144 000 trials is 29 MB to read and scan. NULL where
    // `plan_json` is not a JSON object (never written by lab); readers then take `plan_json`.
    r#"
    ALTER TABLE campaigns ADD COLUMN plan_head TEXT;
    UPDATE campaigns SET plan_head = CASE WHEN json_valid(plan_json) THEN json_remove(plan_json, '$.trials') END;
    "#,
    // 12: what a report reads without a walk over every row of a table. `trials_moved`:
    // the report stamp (`campaigns::report_stamp_on`) lists the moved trials on every `lab
    // report`, and a move is the only update of a trial after its campaign is created.
    // `attempt_report.battery`: the attempt has a battery curve to draw (a non-empty
    // `battery_pct` series, `SeriesRow::is_battery`), which took a read of the whole
    // series table, blobs and all.
    r#"
    CREATE INDEX trials_moved ON trials (campaign, idx) WHERE moved_from IS NOT NULL;
    ALTER TABLE attempt_report ADD COLUMN battery INTEGER NOT NULL DEFAULT 0;
    UPDATE attempt_report SET battery = 1 WHERE EXISTS (
        SELECT 1 FROM series s
        WHERE s.campaign = attempt_report.campaign AND s.trial_idx = attempt_report.trial_idx
            AND s.attempt = attempt_report.attempt AND s.name = 'battery_pct' AND length(s.points) > 0);
    "#,
    // 13: measurements and series keyed by an id of their own (`INTEGER PRIMARY KEY`, so
    // that a VACUUM keeps it) in the order they were written, and found through their
    // attempt's `attempt_report` row: `measurements_from..=measurements_to` and
    // `series_from..=series_to` hold every row of the attempt (NULL: it has none). The
    // key (campaign, trial_idx, attempt, seq) they had was an index written at a random
    // leaf for every attempt (trials that end together are far apart in index order),
    // two of the four a recorded attempt dirtied; ids only grow. An attempt's rows are
    // written together on one connection, so its range holds no other attempt's rows;
    // readers still check the key of each row.
    r#"
    CREATE TABLE measurements_by_id (
        id              INTEGER PRIMARY KEY,
        campaign        TEXT NOT NULL,
        trial_idx       INTEGER NOT NULL,
        attempt         INTEGER NOT NULL,
        seq             INTEGER NOT NULL,
        metric          TEXT NOT NULL,
        value           REAL NOT NULL,
        unit            TEXT NOT NULL,
        source          TEXT NOT NULL,
        FOREIGN KEY (campaign, trial_idx, attempt) REFERENCES attempts(campaign, trial_idx, attempt)
    );
    INSERT INTO measurements_by_id (campaign, trial_idx, attempt, seq, metric, value, unit, source)
        SELECT campaign, trial_idx, attempt, seq, metric, value, unit, source FROM measurements ORDER BY rowid;
    DROP TABLE measurements;
    ALTER TABLE measurements_by_id RENAME TO measurements;
    CREATE TABLE series_by_id (
        id              INTEGER PRIMARY KEY,
        campaign        TEXT NOT NULL,
        trial_idx       INTEGER NOT NULL,
        attempt         INTEGER NOT NULL,
        seq             INTEGER NOT NULL,
        name            TEXT NOT NULL,
        unit            TEXT NOT NULL,
        source          TEXT NOT NULL,
        points          BLOB NOT NULL,
        FOREIGN KEY (campaign, trial_idx, attempt) REFERENCES attempts(campaign, trial_idx, attempt)
    );
    INSERT INTO series_by_id (campaign, trial_idx, attempt, seq, name, unit, source, points)
        SELECT campaign, trial_idx, attempt, seq, name, unit, source, points FROM series ORDER BY rowid;
    DROP TABLE series;
    ALTER TABLE series_by_id RENAME TO series;
    ALTER TABLE attempt_report ADD COLUMN measurements_from INTEGER;
    ALTER TABLE attempt_report ADD COLUMN measurements_to INTEGER;
    ALTER TABLE attempt_report ADD COLUMN series_from INTEGER;
    ALTER TABLE attempt_report ADD COLUMN series_to INTEGER;
    UPDATE attempt_report SET measurements_from = m.lo, measurements_to = m.hi
        FROM (SELECT campaign, trial_idx, attempt, min(id) AS lo, max(id) AS hi FROM measurements
              GROUP BY campaign, trial_idx, attempt) AS m
        WHERE m.campaign = attempt_report.campaign AND m.trial_idx = attempt_report.trial_idx
            AND m.attempt = attempt_report.attempt;
    UPDATE attempt_report SET series_from = s.lo, series_to = s.hi
        FROM (SELECT campaign, trial_idx, attempt, min(id) AS lo, max(id) AS hi FROM series
              GROUP BY campaign, trial_idx, attempt) AS s
        WHERE s.campaign = attempt_report.campaign AND s.trial_idx = attempt_report.trial_idx
            AND s.attempt = attempt_report.attempt;
    "#,
    // 14: when each owner process started (clock ticks after boot, `/proc/<pid>/stat` field
    // 22), beside its pid: a campaign's runner and a schedule slot's claimant are alive
    // only if the process with that pid started then (`store::ProcessId`), so a pid the
    // kernel gave to another process after the owner died does not hold the row. NULL for
    // rows written before: their pid alone decides, as it did.
    r#"
    ALTER TABLE campaigns ADD COLUMN runner_start INTEGER;
    ALTER TABLE schedule_slots ADD COLUMN claimed_start INTEGER;
    "#,
    // 15: who holds each device's lease (`store/lease.rs`): the exclusion itself is an
    // flock on `<store>.locks/<device>.lock`, which the kernel frees when the holder dies;
    // this row says who holds it, for `lab status` and a refusal's message. A row whose
    // process (pid and start) is gone is stale.
    r#"
    CREATE TABLE device_leases (
        device      TEXT PRIMARY KEY,
        purpose     TEXT NOT NULL,
        campaign    TEXT,
        host        TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        pid_start   INTEGER,
        since       TEXT NOT NULL
    );
    "#,
    // 16: the queue for each device (`store/queue.rs`): waiters in order of priority, then
    // ticket (arrival); each holds an flock on `<device>.wait-<token>.lock` while its row is
    // there, which the one behind it sleeps on. A holder's row says which runbook it runs,
    // its priority and how long it expects to hold the device, for the queue's estimates.
    // `port_cuts`: the phones whose hub port `lab care` left off; the next holder switches
    // it on before it uses the phone.
    r#"
    ALTER TABLE device_leases ADD COLUMN runbook TEXT;
    ALTER TABLE device_leases ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE device_leases ADD COLUMN expect_s REAL;
    CREATE TABLE device_queue (
        ticket      INTEGER PRIMARY KEY AUTOINCREMENT,
        device      TEXT NOT NULL,
        priority    INTEGER NOT NULL,
        purpose     TEXT NOT NULL,
        campaign    TEXT,
        runbook     TEXT,
        host        TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        pid_start   INTEGER,
        since       TEXT NOT NULL,
        expect_s    REAL,
        token       TEXT NOT NULL
    );
    CREATE INDEX device_queue_order ON device_queue (device, priority DESC, ticket);
    CREATE TABLE port_cuts (
        device      TEXT PRIMARY KEY,
        port        TEXT NOT NULL,
        since       TEXT NOT NULL
    );
    "#,
    // 17: a campaign's summaries keep the report's order in a column of their own (their
    // rowid kept it, which PostgreSQL has not): for the rows there, their rowid.
    r#"
    ALTER TABLE campaign_summaries ADD COLUMN seq INTEGER;
    UPDATE campaign_summaries SET seq = rowid;
    "#,
    // 18: campaigns the lab runs (docs/agents.md): a submitted campaign waits `queued` with
    // its priority until agents take it; `cancel_requested` stops it where agents run it;
    // `plan_format` is the plan's shape, which an agent must know to run it. `agents`: one
    // row per agent (its liveness is a lock, as a lease's). `attempts_in_flight`: an
    // attempt an agent began and has not recorded, so a killed agent's attempt is recorded
    // interrupted, never dropped. `campaign_events`: what `lab wait` follows.
    // `campaign_looks`: a look (or the end) decided once, by the agent that inserts its row.
    r#"
    ALTER TABLE campaigns ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE campaigns ADD COLUMN submitted INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE campaigns ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE campaigns ADD COLUMN plan_format INTEGER NOT NULL DEFAULT 1;
    CREATE TABLE agents (
        host        TEXT PRIMARY KEY,
        machine     TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        pid_start   INTEGER,
        version     TEXT NOT NULL,
        plan_format INTEGER NOT NULL,
        devices     TEXT NOT NULL,
        since       TEXT NOT NULL,
        state       TEXT NOT NULL,
        refused     TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE attempts_in_flight (
        campaign    TEXT NOT NULL,
        trial_idx   INTEGER NOT NULL,
        attempt     INTEGER NOT NULL,
        device      TEXT NOT NULL,
        host        TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        started_at  TEXT NOT NULL,
        artifact_dir TEXT NOT NULL,
        PRIMARY KEY (campaign, trial_idx, attempt)
    );
    CREATE TABLE campaign_events (
        campaign    TEXT NOT NULL,
        seq         INTEGER NOT NULL,
        at          TEXT NOT NULL,
        event       TEXT NOT NULL,
        PRIMARY KEY (campaign, seq)
    );
    CREATE TABLE campaign_looks (
        campaign    TEXT NOT NULL,
        trials      INTEGER NOT NULL,
        host        TEXT NOT NULL,
        at          TEXT NOT NULL,
        PRIMARY KEY (campaign, trials)
    );
    "#,
    // 19: the raw files of a lab whose artifacts are a bucket (docs/artifacts.md): each
    // file of a campaign's folder (`path`, e.g. `<trial key>.attempt-<n>/log.txt`) with
    // its object `key`, size and SHA-256, the machine holding its local copy, and when its
    // upload was confirmed by reading it back (NULL: pending; the local copy stays).
    r#"
    CREATE TABLE raw_files (
        campaign        TEXT NOT NULL,
        path            TEXT NOT NULL,
        bucket          TEXT NOT NULL,
        key             TEXT NOT NULL,
        size            INTEGER NOT NULL,
        sha256          TEXT NOT NULL,
        host            TEXT NOT NULL,
        confirmed_at    TEXT,
        tries           INTEGER NOT NULL DEFAULT 0,
        last_error      TEXT,
        PRIMARY KEY (campaign, path)
    );
    CREATE INDEX raw_files_pending ON raw_files (bucket, host) WHERE confirmed_at IS NULL;
    "#,
    // 20: a campaign's last event number, which appending agents take turns on (its row's
    // lock) rather than on a lock over the campaign's events for a whole transaction.
    r#"
    CREATE TABLE event_counters (
        campaign    TEXT PRIMARY KEY,
        seq         INTEGER NOT NULL
    );
    INSERT INTO event_counters (campaign, seq) SELECT campaign, MAX(seq) FROM campaign_events GROUP BY campaign;
    "#,
];

pub fn migrate(conn: &mut Connection) -> rusqlite::Result<u32> {
    loop {
        // The version is read under the write lock: processes opening a new store at once
        // (agents started together) migrate it once, one after the other.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let current: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let Some(sql) = MIGRATIONS.get(current as usize) else { return Ok(MIGRATIONS.len() as u32) };
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", current + 1)?;
        tx.commit()?;
    }
}

/// A database at `path` as lab left it at schema `version`: the first `version`
/// migrations applied, `user_version` set (tests of later migrations start from one).
#[cfg(test)]
pub(crate) fn open_at_version(path: &std::path::Path, version: usize) -> Connection {
    let conn = Connection::open(path).unwrap();
    for sql in &MIGRATIONS[..version] {
        conn.execute_batch(sql).unwrap();
    }
    conn.pragma_update(None, "user_version", version as u32).unwrap();
    conn
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{BATTERY_PCT, Series};
    use crate::store::{CampaignStatus, Store};

    /// A store whose campaign has events from before migration 20 numbers the next ones
    /// after them: its counter starts at the last number there.
    #[test]
    fn a_version_19_store_numbers_new_events_after_its_old_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab.db");
        {
            let conn = open_at_version(&path, 19);
            conn.execute_batch(
                "INSERT INTO campaign_events (campaign, seq, at, event) VALUES ('c', 1, 't', 'a'), ('c', 2, 't', 'b');",
            )
            .unwrap();
        }
        let s = crate::store::Store::open(&path).unwrap();
        s.append_events("c", "t2", &["c".into(), "d".into()]).unwrap();
        s.append_events("other", "t2", &["x".into()]).unwrap();
        let seqs: Vec<(i64, String)> = s.events_after("c", 0, 10).unwrap();
        assert_eq!(seqs, [(1, "a".into()), (2, "b".into()), (3, "c".into()), (4, "d".into())]);
        assert_eq!(s.events_after("other", 0, 10).unwrap(), [(1, "x".to_string())]);
    }

    #[test]
    fn a_version_8_store_gains_summaries_findings_and_alerts_and_keeps_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab.db");
        {
            let conn = open_at_version(&path, 8);
            conn.execute_batch(
                "INSERT INTO campaigns (id, runbook_name, runbook_path, runbook_text, runbook_sha256, lab_text,
                    lab_sha256, content_hashes, tool_version, seed, created_at, status, plan_json, max_attempts)
                 VALUES ('old','rb','rb.toml','','','','','{}','0',1,'t','done','{}',3);
                 INSERT INTO schedule_slots (schedule, due_utc, state, campaign) VALUES ('w','d','finished','old');",
            )
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        let version: u32 = s.lock().unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, MIGRATIONS.len() as u32);
        assert_eq!(s.campaign("old").unwrap().status, CampaignStatus::Done);
        assert_eq!(s.slot("w", "d").unwrap().unwrap().campaign.as_deref(), Some("old"));
        // An old campaign has no summaries: stale, so `lab history` computes them.
        assert!(s.summaries("old").unwrap().is_empty());
        assert!(s.history_rows("rb").unwrap().is_empty());
        assert_eq!(s.stale_summaries("rb").unwrap(), ["old"]);
        assert!(s.findings_of_schedule("w").unwrap().is_empty());
        assert!(s.alerts_of_schedule("w").unwrap().is_empty());
    }

    /// A store (in the folder returned, at the path returned) with the campaign of the
    /// report fixture's `data` and its attempts recorded, as `lab run` would leave it.
    fn stored(data: &crate::testing::fixture::Records) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab.db");
        let s = Store::open(&path).unwrap();
        s.create_campaign(&new_campaign(data), 2, 1).unwrap();
        for a in &data.attempts {
            s.record_attempt(a.clone()).unwrap();
        }
        (dir, path)
    }

    /// The campaign of the report fixture's `records`, as `lab run` would create it.
    fn new_campaign(data: &crate::testing::fixture::Records) -> crate::store::NewCampaign {
        crate::store::NewCampaign {
            id: data.campaign.id.clone(),
            runbook_name: "rb".into(),
            runbook_path: "rb.toml".into(),
            runbook_text: String::new(),
            runbook_sha256: String::new(),
            lab_text: String::new(),
            lab_sha256: String::new(),
            content_hashes: serde_json::json!({}),
            tool_version: "0".into(),
            seed: 1,
            created_at: "t".into(),
            plan_json: "{}".into(),
            planned_trials: data.trials.iter().map(|t| t.row.clone()).collect(),
        }
    }

    /// Takes a store's tables back to what migration 13 found: measurements and series
    /// keyed by (campaign, trial_idx, attempt, seq), their rowids in the order written,
    /// no id ranges in `attempt_report`.
    const BACK_TO_12: &str = "
        DROP TABLE event_counters;
        DROP TABLE raw_files;
        DROP TABLE agents;
        DROP TABLE attempts_in_flight;
        DROP TABLE campaign_events;
        DROP TABLE campaign_looks;
        ALTER TABLE campaigns DROP COLUMN priority;
        ALTER TABLE campaigns DROP COLUMN submitted;
        ALTER TABLE campaigns DROP COLUMN cancel_requested;
        ALTER TABLE campaigns DROP COLUMN plan_format;
        ALTER TABLE campaign_summaries DROP COLUMN seq;
        DROP TABLE port_cuts;
        DROP TABLE device_queue;
        DROP TABLE device_leases;
        ALTER TABLE campaigns DROP COLUMN runner_start;
        ALTER TABLE schedule_slots DROP COLUMN claimed_start;
        CREATE TABLE m12 (campaign TEXT NOT NULL, trial_idx INTEGER NOT NULL, attempt INTEGER NOT NULL,
            seq INTEGER NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL, source TEXT NOT NULL,
            PRIMARY KEY (campaign, trial_idx, attempt, seq),
            FOREIGN KEY (campaign, trial_idx, attempt) REFERENCES attempts(campaign, trial_idx, attempt));
        INSERT INTO m12 SELECT campaign, trial_idx, attempt, seq, metric, value, unit, source FROM measurements ORDER BY id;
        DROP TABLE measurements;
        ALTER TABLE m12 RENAME TO measurements;
        CREATE TABLE s12 (campaign TEXT NOT NULL, trial_idx INTEGER NOT NULL, attempt INTEGER NOT NULL,
            seq INTEGER NOT NULL, name TEXT NOT NULL, unit TEXT NOT NULL, source TEXT NOT NULL, points BLOB NOT NULL,
            PRIMARY KEY (campaign, trial_idx, attempt, seq),
            FOREIGN KEY (campaign, trial_idx, attempt) REFERENCES attempts(campaign, trial_idx, attempt));
        INSERT INTO s12 SELECT campaign, trial_idx, attempt, seq, name, unit, source, points FROM series ORDER BY id;
        DROP TABLE series;
        ALTER TABLE s12 RENAME TO series;
        ALTER TABLE attempt_report DROP COLUMN measurements_from;
        ALTER TABLE attempt_report DROP COLUMN measurements_to;
        ALTER TABLE attempt_report DROP COLUMN series_from;
        ALTER TABLE attempt_report DROP COLUMN series_to;
    ";

    #[test]
    fn a_version_9_store_gains_attempt_report_rows_that_read_their_state_json() {
        let data = crate::testing::fixture::records("old");
        let (_dir, path) = stored(&data);
        let expected = Store::open(&path).unwrap().read_columns("old").unwrap();
        {
            // As a version 9 store left them: no attempt_report.
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(&format!(
                "{BACK_TO_12} DROP TABLE attempt_report; ALTER TABLE campaigns DROP COLUMN plan_head;
                     DROP INDEX trials_moved; PRAGMA user_version = 9;"
            ))
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        let n: i64 = s
            .lock()
            .unwrap()
            .query_row("SELECT count(*) FROM attempt_report WHERE state_digest IS NULL", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, data.attempts.len() as i64, "every old attempt backfilled, without a digest");
        assert_eq!(s.read_columns("old").unwrap(), expected, "the same columns, the state from the JSON");
        assert!(!expected.states.groups.is_empty());
    }

    #[test]
    fn a_version_11_store_gains_battery_flags_from_its_series_and_an_index_of_moved_trials() {
        let mut data = crate::testing::fixture::records("old");
        // Every kind: a curve, an empty one, another series only, none.
        let points = vec![(0.0, 100.0), (60.0, 99.5)];
        for (i, a) in data.attempts.iter_mut().enumerate() {
            a.series = match i % 4 {
                0 => vec![Series::new(BATTERY_PCT, "%", "sim", points.clone())],
                1 => vec![Series::new(BATTERY_PCT, "%", "sim", vec![])],
                2 => vec![Series::new("temp_c", "°C", "sim", points.clone())],
                _ => vec![],
            };
        }
        let (_dir, path) = stored(&data);
        let s = Store::open(&path).unwrap();
        let flags = |s: &Store| -> Vec<i64> {
            let conn = s.lock().unwrap();
            let mut st = conn.prepare("SELECT battery FROM attempt_report ORDER BY trial_idx, attempt").unwrap();
            st.query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
        };
        let written = flags(&s);
        assert_eq!(written.iter().sum::<i64>(), data.attempts.len().div_ceil(4) as i64, "{written:?}");
        let expected = s.read_columns("old").unwrap();
        drop(s);
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(&format!(
                "{BACK_TO_12} DROP INDEX trials_moved; ALTER TABLE attempt_report DROP COLUMN battery;
                 PRAGMA user_version = 11;"
            ))
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(flags(&s), written, "the flags backfilled are those written with the attempts");
        assert_eq!(s.read_columns("old").unwrap(), expected);
        let plan: String = s
            .lock()
            .unwrap()
            .query_row(
                "EXPLAIN QUERY PLAN SELECT idx FROM trials WHERE campaign = 'old' AND moved_from IS NOT NULL",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("trials_moved"), "{plan}");
    }

    #[test]
    fn a_version_12_store_gains_ids_for_its_measurements_and_series_and_reads_the_same() {
        let mut data = crate::testing::fixture::records("old");
        let points = vec![(0.0, 100.0), (60.0, 99.5)];
        for (i, a) in data.attempts.iter_mut().enumerate() {
            a.series = match i % 3 {
                0 => vec![
                    Series::new("temp_c", "°C", "sim", points.clone()),
                    Series::new(BATTERY_PCT, "%", "sim", points.clone()),
                ],
                1 => vec![],
                _ => vec![Series::new("temp_c", "°C", "sim", points.clone())],
            };
            if i % 5 == 4 {
                a.measurements.clear();
            }
        }
        let keys: Vec<(u32, u32)> = data.attempts.iter().map(|a| (a.trial_idx, a.attempt)).collect();
        let (_dir, path) = stored(&data);
        let read = |s: &Store| {
            let points = s.battery_points("old", &keys).unwrap();
            (s.read_columns("old").unwrap(), s.attempts("old").unwrap(), s.series("old").unwrap(), points)
        };
        type Ranges = Vec<((u32, u32), [Option<i64>; 4])>;
        let ranges = |s: &Store| -> Ranges {
            let conn = s.lock().unwrap();
            let mut st = conn
                .prepare(
                    "SELECT trial_idx, attempt, measurements_from, measurements_to, series_from, series_to
                     FROM attempt_report ORDER BY trial_idx, attempt",
                )
                .unwrap();
            st.query_map([], |r| Ok(((r.get(0)?, r.get(1)?), [r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?])))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        let s = Store::open(&path).unwrap();
        let expected = read(&s);
        assert!(expected.3.iter().any(Option::is_some) && expected.3.iter().any(Option::is_none));
        let written = ranges(&s);
        // Each attempt's range holds as many rows as it has, and none is there for none.
        for (key, [mf, mt, sf, st]) in &written {
            let a = data.attempts.iter().find(|a| (a.trial_idx, a.attempt) == *key).unwrap();
            let len = |from: &Option<i64>, to: &Option<i64>| from.zip(*to).map_or(0, |(f, t)| t - f + 1);
            assert_eq!(len(mf, mt), a.measurements.len() as i64, "{key:?}");
            assert_eq!(len(sf, st), a.series.len() as i64, "{key:?}");
        }
        drop(s);
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(&format!("{BACK_TO_12} PRAGMA user_version = 12;")).unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(ranges(&s), written, "the ranges backfilled are those written with the attempts");
        assert_eq!(read(&s), expected, "the same columns, attempts, series and battery curves");
        let conn = s.lock().unwrap();
        for table in ["measurements", "series"] {
            let indexes: i64 =
                conn.query_row("SELECT count(*) FROM pragma_index_list(?1)", [table], |r| r.get(0)).unwrap();
            assert_eq!(indexes, 0, "{table}: no index to write at a random place for every attempt");
        }
        // The readers walk each attempt's range of ids, not the table.
        for sql in [super::super::attempts::MEASUREMENTS_OF_CAMPAIGN, super::super::attempts::SERIES_OF_CAMPAIGN] {
            let mut st = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let plan: Vec<String> = st.query_map(["old"], |r| r.get(3)).unwrap().collect::<Result<_, _>>().unwrap();
            assert!(plan.iter().any(|p| p.contains("INTEGER PRIMARY KEY (rowid>? AND rowid<?)")), "{plan:?}");
            assert!(!plan.iter().any(|p| p.starts_with("SCAN")), "{plan:?}");
        }
        let mut st = conn.prepare(&format!("EXPLAIN QUERY PLAN {}", super::super::columns::BATTERY_POINTS)).unwrap();
        let plan: Vec<String> = st
            .query_map(rusqlite::params!["old", 0, 0, BATTERY_PCT], |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(plan.iter().any(|p| p.contains("INTEGER PRIMARY KEY (rowid>? AND rowid<?)")), "{plan:?}");
    }
}
