//! The PostgreSQL store's schema, and its migrations. Integers are `BIGINT`, reals
//! `DOUBLE PRECISION`, bytes `BYTEA`, so every value is one of [`super::Value`]'s on both
//! backends; text is `COLLATE "C"`, so it sorts by its bytes as SQLite's does (reports
//! list things in the same order on both). Generated keys are `BIGSERIAL` (SQLite's
//! rowids). The version is a row of `lab_schema`; migrating takes a transaction-level
//! advisory lock first, so two processes migrating at once take turns and the second
//! finds the work done.

use super::conn::{Conn, DbError};
use super::value::vals;

/// The key of the advisory lock migrations take.
const MIGRATION_LOCK: i64 = 0x006c_6162_5f6d_6967; // "lab_mig"

/// PostgreSQL's migrations: the first is SQLite's schema as its migrations 1–16 leave
/// it, with `device_keys` (each device's advisory-lock key); each later one is one of
/// SQLite's (17 on: the second here).
pub const PG_MIGRATIONS: &[&str] = &[
    r#"
    CREATE TABLE campaigns (
        id              TEXT COLLATE "C" PRIMARY KEY,
        runbook_name    TEXT COLLATE "C" NOT NULL,
        runbook_path    TEXT COLLATE "C" NOT NULL,
        runbook_text    TEXT COLLATE "C" NOT NULL,
        runbook_sha256  TEXT COLLATE "C" NOT NULL,
        lab_text        TEXT COLLATE "C" NOT NULL,
        lab_sha256      TEXT COLLATE "C" NOT NULL,
        content_hashes  TEXT COLLATE "C" NOT NULL,
        tool_version    TEXT COLLATE "C" NOT NULL,
        seed            BIGINT NOT NULL,
        created_at      TEXT COLLATE "C" NOT NULL,
        finished_at     TEXT COLLATE "C",
        status          TEXT COLLATE "C" NOT NULL,
        runner_pid      BIGINT,
        note            TEXT COLLATE "C",
        plan_json       TEXT COLLATE "C" NOT NULL,
        footprint_json  TEXT COLLATE "C",
        max_attempts    BIGINT NOT NULL,
        plan_head       TEXT COLLATE "C",
        runner_start    BIGINT
    );
    CREATE TABLE trials (
        campaign        TEXT COLLATE "C" NOT NULL REFERENCES campaigns(id),
        idx             BIGINT NOT NULL,
        key             TEXT COLLATE "C" NOT NULL,
        device          TEXT COLLATE "C" NOT NULL,
        device_model    TEXT COLLATE "C" NOT NULL,
        variant         TEXT COLLATE "C" NOT NULL,
        build           TEXT COLLATE "C" NOT NULL,
        config          TEXT COLLATE "C" NOT NULL,
        repeat          BIGINT NOT NULL,
        block           BIGINT NOT NULL,
        device_order    BIGINT NOT NULL,
        moved_from      TEXT COLLATE "C",
        PRIMARY KEY (campaign, idx)
    );
    CREATE INDEX trials_moved ON trials (campaign, idx) WHERE moved_from IS NOT NULL;
    CREATE TABLE attempts (
        campaign        TEXT COLLATE "C" NOT NULL,
        trial_idx       BIGINT NOT NULL,
        attempt         BIGINT NOT NULL,
        status          TEXT COLLATE "C" NOT NULL,
        reasons         TEXT COLLATE "C" NOT NULL,
        phases          TEXT COLLATE "C" NOT NULL,
        started_at      TEXT COLLATE "C" NOT NULL,
        ended_at        TEXT COLLATE "C" NOT NULL,
        soak_start_s    DOUBLE PRECISION NOT NULL,
        artifact_dir    TEXT COLLATE "C" NOT NULL,
        state_before    TEXT COLLATE "C" NOT NULL,
        state_after     TEXT COLLATE "C" NOT NULL,
        device          TEXT COLLATE "C",
        untether        TEXT COLLATE "C",
        labels          TEXT COLLATE "C" NOT NULL DEFAULT '[]',
        state_soak      TEXT COLLATE "C",
        PRIMARY KEY (campaign, trial_idx, attempt),
        FOREIGN KEY (campaign, trial_idx) REFERENCES trials(campaign, idx)
    );
    CREATE TABLE device_status (
        device          TEXT COLLATE "C" PRIMARY KEY,
        state           TEXT COLLATE "C" NOT NULL,
        battery_pct     DOUBLE PRECISION,
        campaign        TEXT COLLATE "C",
        trial_key       TEXT COLLATE "C",
        phase           TEXT COLLATE "C",
        updated_at      TEXT COLLATE "C" NOT NULL
    );
    CREATE TABLE operator_steps (
        id              BIGSERIAL PRIMARY KEY,
        campaign        TEXT COLLATE "C" NOT NULL REFERENCES campaigns(id),
        device          TEXT COLLATE "C" NOT NULL,
        trial_key       TEXT COLLATE "C",
        attempt         BIGINT,
        step            TEXT COLLATE "C" NOT NULL,
        step_when       TEXT COLLATE "C" NOT NULL,
        text            TEXT COLLATE "C" NOT NULL,
        attest          TEXT COLLATE "C" NOT NULL,
        asked_at        TEXT COLLATE "C" NOT NULL,
        deadline        TEXT COLLATE "C" NOT NULL,
        status          TEXT COLLATE "C" NOT NULL,
        answered_at     TEXT COLLATE "C",
        answered_by     TEXT COLLATE "C",
        answer          TEXT COLLATE "C"
    );
    CREATE INDEX operator_steps_pending ON operator_steps (campaign, status);
    CREATE TABLE attestations (
        campaign        TEXT COLLATE "C" NOT NULL,
        trial_idx       BIGINT NOT NULL,
        attempt         BIGINT NOT NULL,
        seq             BIGINT NOT NULL,
        step            TEXT COLLATE "C" NOT NULL,
        step_when       TEXT COLLATE "C" NOT NULL,
        text            TEXT COLLATE "C" NOT NULL,
        answered_by     TEXT COLLATE "C" NOT NULL,
        answered_at     TEXT COLLATE "C" NOT NULL,
        answer          TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (campaign, trial_idx, attempt, seq),
        FOREIGN KEY (campaign, trial_idx, attempt) REFERENCES attempts(campaign, trial_idx, attempt)
    );
    CREATE TABLE battery_readings (
        device          TEXT COLLATE "C" NOT NULL,
        at              TEXT COLLATE "C" NOT NULL,
        battery_pct     DOUBLE PRECISION,
        health_pct      DOUBLE PRECISION,
        cycle_count     BIGINT,
        source          TEXT COLLATE "C" NOT NULL
    );
    CREATE INDEX battery_readings_by_device ON battery_readings (device, at);
    CREATE TABLE schedule_slots (
        schedule        TEXT COLLATE "C" NOT NULL,
        due_utc         TEXT COLLATE "C" NOT NULL,
        state           TEXT COLLATE "C" NOT NULL,
        claimed_at      TEXT COLLATE "C",
        claimed_pid     BIGINT,
        claimed_host    TEXT COLLATE "C",
        campaign        TEXT COLLATE "C",
        finished_at     TEXT COLLATE "C",
        outcome         TEXT COLLATE "C",
        skipped_because TEXT COLLATE "C",
        claimed_start   BIGINT,
        UNIQUE (schedule, due_utc)
    );
    CREATE TABLE schedules_seen (
        schedule        TEXT COLLATE "C" PRIMARY KEY,
        first_seen_utc  TEXT COLLATE "C" NOT NULL
    );
    CREATE TABLE campaign_summaries (
        campaign        TEXT COLLATE "C" NOT NULL REFERENCES campaigns(id),
        model           TEXT COLLATE "C" NOT NULL,
        variant         TEXT COLLATE "C" NOT NULL,
        metric          TEXT COLLATE "C" NOT NULL,
        build           TEXT COLLATE "C" NOT NULL,
        config          TEXT COLLATE "C" NOT NULL,
        build_sha256    TEXT COLLATE "C",
        devices         TEXT COLLATE "C" NOT NULL,
        unit            TEXT COLLATE "C" NOT NULL,
        sources         TEXT COLLATE "C" NOT NULL,
        gating          BIGINT NOT NULL,
        n               BIGINT NOT NULL,
        non_finite      BIGINT NOT NULL,
        mean            DOUBLE PRECISION,
        ci_low          DOUBLE PRECISION,
        ci_high         DOUBLE PRECISION,
        confidence      DOUBLE PRECISION NOT NULL,
        summary         TEXT COLLATE "C",
        vals            BYTEA NOT NULL,
        summary_version BIGINT NOT NULL,
        PRIMARY KEY (campaign, model, variant, metric)
    );
    CREATE TABLE schedule_findings (
        id              BIGSERIAL PRIMARY KEY,
        schedule        TEXT COLLATE "C" NOT NULL,
        due_utc         TEXT COLLATE "C" NOT NULL,
        campaign        TEXT COLLATE "C" NOT NULL,
        model           TEXT COLLATE "C" NOT NULL,
        variant         TEXT COLLATE "C" NOT NULL,
        metric          TEXT COLLATE "C" NOT NULL,
        direction       TEXT COLLATE "C" NOT NULL,
        by_verdict      BIGINT NOT NULL,
        change_point    TEXT COLLATE "C",
        baseline        TEXT COLLATE "C" NOT NULL,
        screen          TEXT COLLATE "C" NOT NULL,
        state           TEXT COLLATE "C" NOT NULL,
        confirm_campaign TEXT COLLATE "C",
        confirm         TEXT COLLATE "C",
        decided_at      TEXT COLLATE "C",
        note            TEXT COLLATE "C",
        UNIQUE (schedule, due_utc, model, variant, metric)
    );
    CREATE TABLE schedule_alerts (
        schedule        TEXT COLLATE "C" NOT NULL,
        due_utc         TEXT COLLATE "C" NOT NULL,
        channel         TEXT COLLATE "C" NOT NULL,
        target          TEXT COLLATE "C" NOT NULL,
        payload         TEXT COLLATE "C" NOT NULL,
        state           TEXT COLLATE "C" NOT NULL,
        tries           BIGINT NOT NULL,
        response        TEXT COLLATE "C",
        error           TEXT COLLATE "C",
        at              TEXT COLLATE "C" NOT NULL,
        UNIQUE (schedule, due_utc, channel)
    );
    CREATE TABLE attempt_report (
        campaign        TEXT COLLATE "C" NOT NULL,
        trial_idx       BIGINT NOT NULL,
        attempt         BIGINT NOT NULL,
        status          TEXT COLLATE "C" NOT NULL,
        device          TEXT COLLATE "C",
        untether        TEXT COLLATE "C",
        soak_start_s    DOUBLE PRECISION NOT NULL,
        phases          TEXT COLLATE "C" NOT NULL,
        reasons         TEXT COLLATE "C" NOT NULL,
        labels          TEXT COLLATE "C" NOT NULL,
        state_digest    BYTEA,
        battery         BIGINT NOT NULL DEFAULT 0,
        measurements_from BIGINT,
        measurements_to BIGINT,
        series_from     BIGINT,
        series_to       BIGINT,
        PRIMARY KEY (campaign, trial_idx, attempt)
    );
    CREATE TABLE measurements (
        id              BIGSERIAL PRIMARY KEY,
        campaign        TEXT COLLATE "C" NOT NULL,
        trial_idx       BIGINT NOT NULL,
        attempt         BIGINT NOT NULL,
        seq             BIGINT NOT NULL,
        metric          TEXT COLLATE "C" NOT NULL,
        value           DOUBLE PRECISION NOT NULL,
        unit            TEXT COLLATE "C" NOT NULL,
        source          TEXT COLLATE "C" NOT NULL,
        FOREIGN KEY (campaign, trial_idx, attempt) REFERENCES attempts(campaign, trial_idx, attempt)
    );
    CREATE TABLE series (
        id              BIGSERIAL PRIMARY KEY,
        campaign        TEXT COLLATE "C" NOT NULL,
        trial_idx       BIGINT NOT NULL,
        attempt         BIGINT NOT NULL,
        seq             BIGINT NOT NULL,
        name            TEXT COLLATE "C" NOT NULL,
        unit            TEXT COLLATE "C" NOT NULL,
        source          TEXT COLLATE "C" NOT NULL,
        points          BYTEA NOT NULL,
        FOREIGN KEY (campaign, trial_idx, attempt) REFERENCES attempts(campaign, trial_idx, attempt)
    );
    CREATE TABLE device_keys (
        device          TEXT COLLATE "C" PRIMARY KEY,
        key             BIGSERIAL NOT NULL UNIQUE
    );
    CREATE TABLE device_leases (
        device          TEXT COLLATE "C" PRIMARY KEY,
        purpose         TEXT COLLATE "C" NOT NULL,
        campaign        TEXT COLLATE "C",
        host            TEXT COLLATE "C" NOT NULL,
        pid             BIGINT NOT NULL,
        pid_start       BIGINT,
        since           TEXT COLLATE "C" NOT NULL,
        runbook         TEXT COLLATE "C",
        priority        BIGINT NOT NULL DEFAULT 0,
        expect_s        DOUBLE PRECISION
    );
    CREATE TABLE device_queue (
        ticket          BIGSERIAL PRIMARY KEY,
        device          TEXT COLLATE "C" NOT NULL,
        priority        BIGINT NOT NULL,
        purpose         TEXT COLLATE "C" NOT NULL,
        campaign        TEXT COLLATE "C",
        runbook         TEXT COLLATE "C",
        host            TEXT COLLATE "C" NOT NULL,
        pid             BIGINT NOT NULL,
        pid_start       BIGINT,
        since           TEXT COLLATE "C" NOT NULL,
        expect_s        DOUBLE PRECISION,
        token           TEXT COLLATE "C" NOT NULL
    );
    CREATE INDEX device_queue_order ON device_queue (device, priority DESC, ticket);
    CREATE TABLE port_cuts (
        device          TEXT COLLATE "C" PRIMARY KEY,
        port            TEXT COLLATE "C" NOT NULL,
        since           TEXT COLLATE "C" NOT NULL
    );
"#,
    // As SQLite's 17: summaries in the report's order.
    "ALTER TABLE campaign_summaries ADD COLUMN seq BIGINT;",
    // Readings at one time keep the order written (SQLite's rowid).
    "ALTER TABLE battery_readings ADD COLUMN id BIGSERIAL;",
    // Every committed write tells the database's listeners (`LISTEN lab_changes`) which
    // table changed: a watcher learns of other machines' writes without reading a table,
    // and only once they are committed. A migration that adds a table adds its trigger
    // (a test checks that every table has one, but those the last migration leaves out).
    r#"
    CREATE FUNCTION lab_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('lab_changes', TG_TABLE_NAME);
        RETURN NULL;
    END $$;
    DO $$
    DECLARE t text;
    BEGIN
        FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'lab_schema'
        LOOP
            EXECUTE format('CREATE TRIGGER lab_changes AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %I
                            FOR EACH STATEMENT EXECUTE FUNCTION lab_notify()', t);
        END LOOP;
    END $$;
"#,
    // A report's COPY of its measurements starts from their id range: two index probes,
    // not a scan of every attempt's row (a twentieth of a report's time on 144 000).
    "CREATE INDEX attempt_report_measurements_from ON attempt_report (campaign, measurements_from);
     CREATE INDEX attempt_report_measurements_to ON attempt_report (campaign, measurements_to);",
    // As SQLite's 18: campaigns the lab runs, agents, attempts in flight, events, looks.
    r#"
    ALTER TABLE campaigns ADD COLUMN priority BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE campaigns ADD COLUMN submitted BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE campaigns ADD COLUMN cancel_requested BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE campaigns ADD COLUMN plan_format BIGINT NOT NULL DEFAULT 1;
    CREATE TABLE agents (
        host        TEXT COLLATE "C" PRIMARY KEY,
        machine     TEXT COLLATE "C" NOT NULL,
        pid         BIGINT NOT NULL,
        pid_start   BIGINT,
        version     TEXT COLLATE "C" NOT NULL,
        plan_format BIGINT NOT NULL,
        devices     TEXT COLLATE "C" NOT NULL,
        since       TEXT COLLATE "C" NOT NULL,
        state       TEXT COLLATE "C" NOT NULL,
        refused     TEXT COLLATE "C" NOT NULL DEFAULT ''
    );
    CREATE TABLE attempts_in_flight (
        campaign    TEXT COLLATE "C" NOT NULL,
        trial_idx   BIGINT NOT NULL,
        attempt     BIGINT NOT NULL,
        device      TEXT COLLATE "C" NOT NULL,
        host        TEXT COLLATE "C" NOT NULL,
        pid         BIGINT NOT NULL,
        started_at  TEXT COLLATE "C" NOT NULL,
        artifact_dir TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (campaign, trial_idx, attempt)
    );
    CREATE TABLE campaign_events (
        campaign    TEXT COLLATE "C" NOT NULL,
        seq         BIGINT NOT NULL,
        at          TEXT COLLATE "C" NOT NULL,
        event       TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (campaign, seq)
    );
    CREATE TABLE campaign_looks (
        campaign    TEXT COLLATE "C" NOT NULL,
        trials      BIGINT NOT NULL,
        host        TEXT COLLATE "C" NOT NULL,
        at          TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (campaign, trials)
    );
    DO $$
    DECLARE t text;
    BEGIN
        FOREACH t IN ARRAY ARRAY['agents', 'attempts_in_flight', 'campaign_events', 'campaign_looks']
        LOOP
            EXECUTE format('CREATE TRIGGER lab_changes AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %I
                            FOR EACH STATEMENT EXECUTE FUNCTION lab_notify()', t);
        END LOOP;
    END $$;
"#,
    // As SQLite's 19: raw files in a bucket, with its trigger.
    r#"
    CREATE TABLE raw_files (
        campaign        TEXT COLLATE "C" NOT NULL,
        path            TEXT COLLATE "C" NOT NULL,
        bucket          TEXT COLLATE "C" NOT NULL,
        key             TEXT COLLATE "C" NOT NULL,
        size            BIGINT NOT NULL,
        sha256          TEXT COLLATE "C" NOT NULL,
        host            TEXT COLLATE "C" NOT NULL,
        confirmed_at    TEXT COLLATE "C",
        tries           BIGINT NOT NULL DEFAULT 0,
        last_error      TEXT COLLATE "C",
        PRIMARY KEY (campaign, path)
    );
    CREATE INDEX raw_files_pending ON raw_files (bucket, host) WHERE confirmed_at IS NULL;
    CREATE TRIGGER lab_changes AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON raw_files
        FOR EACH STATEMENT EXECUTE FUNCTION lab_notify();
"#,
    // As SQLite's 20: event numbers. And `lab_changes` only while someone watches: a
    // notifying commit takes the database's notify lock and signals every listening
    // session (agents and `lab wait`s listen on channels of their own), and each signalled
    // session runs a transaction to read it: a quarter of the server's CPU in the agents
    // benchmark. A watcher (`data_version`, PostgreSQL only) has a row in `lab_watchers`
    // and holds the advisory lock `WATCHER_LOCK + pid` while its session lives; a write
    // notifies when a row's lock is held (a row whose watcher died is skipped, and removed
    // by the next watcher). The two tables agents write at every trial and no page shows
    // stop notifying at all: `lab wait` and the agents follow them on their own channels
    // (`store/wake.rs`).
    r#"
    CREATE TABLE event_counters (
        campaign    TEXT COLLATE "C" PRIMARY KEY,
        seq         BIGINT NOT NULL
    );
    INSERT INTO event_counters (campaign, seq) SELECT campaign, MAX(seq) FROM campaign_events GROUP BY campaign;
    DROP TRIGGER lab_changes ON attempts_in_flight;
    DROP TRIGGER lab_changes ON campaign_events;
    CREATE TABLE lab_watchers (
        pid         BIGINT PRIMARY KEY,
        since       TEXT COLLATE "C" NOT NULL
    );
    CREATE OR REPLACE FUNCTION lab_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE w BIGINT;
    BEGIN
        FOR w IN SELECT pid FROM lab_watchers LOOP
            -- Had at once: that watcher's session is gone (held until this commit).
            IF NOT pg_try_advisory_xact_lock(7809631390995054592 + w) THEN
                PERFORM pg_notify('lab_changes', TG_TABLE_NAME);
                RETURN NULL;
            END IF;
        END LOOP;
        RETURN NULL;
    END $$;
"#,
];

/// The advisory lock a watcher of `lab_changes` holds, plus its backend's pid ("lab_w" and
/// zeros: far from `device_keys`' numbers and the recording lock). In the last migration's
/// `lab_notify` as a literal.
pub(crate) const WATCHER_LOCK: i64 = 0x6c61_625f_7700_0000;

/// Brings a PostgreSQL store's schema up to date; the version it is at. Safe with several
/// processes at once: the first to take the lock migrates, the others find it done.
pub fn migrate_postgres(c: &mut dyn Conn) -> Result<u32, DbError> {
    let now = PG_MIGRATIONS.len() as u32;
    // Up to date already, the common case (each of an agent's campaign parts opens a
    // store): one read, no lock and no write. A version only rises, so one read that finds
    // this lab's is final. Before, every open took the lock and updated the row: the
    // agents bench's eighty parts starting at once queued behind each other on it, 0.9 s
    // each. Anything else (no table yet, an older or newer version, an error) goes the
    // locked way below, which reports it.
    if let Ok(Some(row)) = c.query_opt("SELECT version FROM lab_schema", &[])
        && row.read::<u32>().is_ok_and(|v| v == now)
    {
        return Ok(now);
    }
    c.transaction(|c| {
        c.execute("SELECT pg_advisory_xact_lock(?1)", &vals![MIGRATION_LOCK])?;
        // Looked up, not `CREATE … IF NOT EXISTS`: that needs the right to create in the
        // schema even when the table is there, which an agent's role has not (docs/agents.md).
        let there = c.query(
            "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'lab_schema'",
            &[],
        )?[0]
            .read::<i64>()?;
        if there == 0 {
            c.batch("CREATE TABLE lab_schema (version BIGINT NOT NULL)")?;
        }
        let current = match c.query_opt("SELECT version FROM lab_schema", &[])? {
            Some(r) => r.read::<u32>()?,
            None => {
                c.execute("INSERT INTO lab_schema (version) VALUES (0)", &[])?;
                0
            }
        };
        if current as usize > PG_MIGRATIONS.len() {
            return Err(DbError::Type(format!(
                "the store's schema is version {current}, newer than this lab's {}; fix: use a newer lab",
                PG_MIGRATIONS.len()
            )));
        }
        if current == now {
            return Ok(now);
        }
        for sql in PG_MIGRATIONS.iter().skip(current as usize) {
            c.batch(sql)?;
        }
        c.execute("UPDATE lab_schema SET version = ?1", &vals![now])?;
        Ok(now)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{PgOwner, PgUrl};

    /// `lab_changes` is sent only while a watcher (a connection that asked for its
    /// `data_version`) lives: not before one, and not after its session ended.
    #[test_needs::needs(postgres)]
    #[test]
    fn writes_notify_only_while_a_watcher_lives() {
        assert!(PG_MIGRATIONS.last().unwrap().contains(&format!("pg_try_advisory_xact_lock({WATCHER_LOCK} + w)")));
        let url = crate::testing::postgres::fresh_database();
        let parsed = PgUrl::parse(&url).unwrap();
        let writer = PgOwner::connect(&parsed).unwrap();
        writer.call(migrate_postgres).unwrap();
        let mut raw = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        raw.batch_execute("LISTEN lab_changes").unwrap();
        let heard = |raw: &mut postgres::Client| {
            use postgres::fallible_iterator::FallibleIterator;
            raw.batch_execute("").unwrap();
            raw.notifications().iter().count().unwrap()
        };
        let write = |n: u32| {
            writer
                .call(move |c| c.execute("INSERT INTO device_keys (device) VALUES (?1)", &vals![format!("d{n}")]))
                .unwrap();
        };
        write(1);
        assert_eq!(heard(&mut raw), 0, "notified with nobody watching");
        let watcher = PgOwner::connect(&parsed).unwrap();
        watcher.call(|c| c.data_version()).unwrap();
        write(2);
        assert_eq!(heard(&mut raw), 1, "a watcher watches");
        drop(watcher);
        // Its session ends on the server a moment after the socket closes.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut n = 3;
        loop {
            write(n);
            if heard(&mut raw) == 0 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "still notified after the watcher left");
            std::thread::sleep(std::time::Duration::from_millis(100));
            n += 1;
        }
    }

    /// A store whose schema is this lab's opens without the migration lock: with the lock
    /// held by another session (a migration under way elsewhere), the open still returns,
    /// and it writes nothing.
    #[test_needs::needs(postgres)]
    #[test]
    fn an_up_to_date_schema_opens_without_waiting_for_the_migration_lock() {
        let raw_url = crate::testing::postgres::fresh_database();
        let url = PgUrl::parse(&raw_url).unwrap();
        assert_eq!(PgOwner::connect(&url).unwrap().call(migrate_postgres).unwrap(), PG_MIGRATIONS.len() as u32);
        let mut holder = postgres::Client::connect(&raw_url, postgres::NoTls).unwrap();
        let row = |h: &mut postgres::Client| {
            h.query_one("SELECT ctid::text FROM lab_schema", &[]).unwrap().get::<_, String>(0)
        };
        let before = row(&mut holder);
        holder.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]).unwrap();
        let opener = PgOwner::connect(&url).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(opener.call(migrate_postgres));
        });
        let v = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the open waited for the migration lock")
            .unwrap();
        assert_eq!(v, PG_MIGRATIONS.len() as u32);
        // Nothing written: the version's row is the tuple the first migration left.
        assert_eq!(row(&mut holder), before);
        // An older version still migrates under the lock: with the lock held, it waits.
        holder.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]).unwrap();
        holder.execute("UPDATE lab_schema SET version = version - 1", &[]).unwrap();
        holder.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]).unwrap();
        let behind = PgOwner::connect(&url).unwrap();
        behind.call(|c| c.batch("SET lock_timeout = '300ms'")).unwrap();
        let err = behind.call(migrate_postgres).unwrap_err().to_string();
        assert!(err.contains("lock timeout"), "{err}");
    }

    /// Every table of the SQLite store is there, with the same columns in the same order.
    #[test_needs::needs(postgres)]
    #[test]
    fn two_processes_migrating_at_once_leave_the_sqlite_schema_once() {
        let url = PgUrl::parse(&crate::testing::postgres::fresh_database()).unwrap();
        let runs: Vec<_> = (0..3)
            .map(|_| {
                let url = url.clone();
                std::thread::spawn(move || PgOwner::connect(&url).unwrap().call(migrate_postgres).unwrap())
            })
            .collect();
        for r in runs {
            assert_eq!(r.join().unwrap(), PG_MIGRATIONS.len() as u32);
        }
        let pg = PgOwner::connect(&url).unwrap();
        let silent = pg
            .call(|c| {
                c.query(
                    "SELECT t.tablename::text FROM pg_tables t
                     WHERE t.schemaname = current_schema()
                       AND t.tablename NOT IN
                           ('lab_schema', 'attempts_in_flight', 'campaign_events', 'event_counters', 'lab_watchers')
                       AND NOT EXISTS (
                         SELECT 1 FROM pg_trigger g JOIN pg_class k ON g.tgrelid = k.oid
                         WHERE k.relname = t.tablename AND g.tgname = 'lab_changes')",
                    &[],
                )
            })
            .unwrap();
        let silent: Vec<String> = silent.iter().map(|r| r.get(0).unwrap()).collect();
        assert!(silent.is_empty(), "tables whose writes tell no watcher: {silent:?}");
        let columns = pg
            .call(|c| {
                c.query(
                    "SELECT table_name::text, string_agg(column_name::text, ',' ORDER BY ordinal_position)
                     FROM information_schema.columns WHERE table_schema = 'public' AND table_name::text <> 'lab_schema'
                       AND table_name::text <> 'device_keys' AND table_name::text <> 'lab_watchers'
                       -- SQLite's rowid, named on PostgreSQL.
                       AND NOT (table_name::text = 'battery_readings' AND column_name::text = 'id')
                     GROUP BY table_name ORDER BY table_name",
                    &[],
                )
            })
            .unwrap();
        let pg: Vec<(String, String)> =
            columns.iter().map(|r| (r.get::<String>(0).unwrap(), r.get::<String>(1).unwrap())).collect();
        let dir = tempfile::tempdir().unwrap();
        let sqlite = crate::store::Store::open(&dir.path().join("lab.db")).unwrap();
        let conn = sqlite.lock().unwrap();
        let mut tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        tables.sort();
        let want: Vec<(String, String)> = tables
            .iter()
            .map(|t| {
                let cols: Vec<String> = conn
                    .prepare(&format!("SELECT name FROM pragma_table_info('{t}') ORDER BY cid"))
                    .unwrap()
                    .query_map([], |r| r.get(0))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                (t.clone(), cols.join(","))
            })
            .collect();
        assert_eq!(pg, want);
    }
}
