//! `Store`: the SQLite database behind campaigns.
//!
//! rusqlite is blocking; async callers go through `tokio::task::spawn_blocking`
//! (see `runner::campaign`), and the runner's attempts through one thread of their own
//! (`runner::recorder`). WAL mode lets `lab status` read from another
//! terminal while `lab run` writes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, params};

use super::ProcessId;
use super::backend::{Conn, DbError, Row, Value, vals};
use super::batch::{self, AttemptQueue, Turn};
use super::encoded_attempt::{EncodedAttempt, SeriesRow};
use super::process_id::start_from_column;
use super::records::*;
use super::schema;
use crate::measure::{Measurement, Series, UntetherMode};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {path}: {source}; fix: check the path and permissions, or delete a corrupt file")]
    Open { path: PathBuf, source: rusqlite::Error },
    #[error("store {path} does not exist; fix: run `lab run RUNBOOK` first, or pass --lab for another lab")]
    Missing { path: PathBuf },
    #[error("store: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("store: bad JSON in column: {0}")]
    Json(#[from] serde_json::Error),
    #[error("no campaign `{0}` in the store; fix: `lab status` lists campaigns")]
    NoCampaign(String),
    #[error("store task: {0}")]
    Internal(String),
    /// The PostgreSQL server cannot be reached, or refused this user (said without the password).
    #[error("store: {0}")]
    Unreachable(String),
    #[error("attempt {attempt} of trial {trial} in campaign {campaign} is already recorded")]
    Duplicate { campaign: String, trial: u32, attempt: u32 },
}

impl From<super::backend::DbError> for StoreError {
    fn from(e: super::backend::DbError) -> StoreError {
        super::lease::db_err(e)
    }
}

#[derive(Clone)]
pub struct Store {
    /// SQLite's connection, for what only SQLite does (`None` on PostgreSQL).
    pub(super) conn: Option<Arc<Mutex<Connection>>>,
    /// The connection, for the operations written once for both backends.
    pub(super) db: super::backend::Db,
    /// What leases are made of: lock files next to a SQLite store, advisory locks on PostgreSQL.
    pub(super) locks: Arc<dyn super::backend::Locks>,
    /// The SQLite file, or the PostgreSQL URL as shown (without its password).
    path: PathBuf,
    /// Attempts waiting to be committed together (`record_attempt`).
    attempts: Arc<AttemptQueue>,
    /// Commits made by `record_attempt` and `set_device_statuses`: the runner's writes.
    commits: Arc<AtomicU64>,
    /// Nanoseconds spent in the transactions that record attempts (the benchmark prints it).
    recording_ns: Arc<AtomicU64>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// Where a SQLite store's lock files are: `<store file>.locks/`.
pub(super) fn lock_dir(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".locks");
    PathBuf::from(name)
}

/// Log pages after which a commit checkpoints (`PRAGMA wal_autocheckpoint`).
pub const WAL_CHECKPOINT_PAGES: i64 = 8000;

fn json_text(v: &serde_json::Value) -> String {
    v.to_string()
}

/// Every column of `campaigns` but the plan's: SQLite copies each selected column out of
/// the row, and a big plan is tens of megabytes.
const HEAD_COLUMNS: &str = "id, runbook_name, runbook_path, runbook_text, runbook_sha256, lab_text, lab_sha256, \
content_hashes, tool_version, seed, created_at, finished_at, status, runner_pid, runner_start, note, footprint_json, max_attempts";

/// A plan's head (`campaigns.plan_head`, migration 11): the plan's JSON object without
/// its `trials`; `None` if the text is not a JSON object. The trials are skipped as they
/// are read, never built (SQLite's `json_remove` builds a tree of the whole text: a plan of
/// 144 000 trials took 130 MB more at the start of a run).
pub(crate) fn plan_head(plan_json: &str) -> Option<String> {
    struct Head(serde_json::Map<String, serde_json::Value>);
    impl<'de> serde::Deserialize<'de> for Head {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Head;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a plan as a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Head, A::Error> {
                    let mut head = serde_json::Map::new();
                    while let Some(key) = map.next_key::<String>()? {
                        if key == "trials" {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        } else {
                            head.insert(key, map.next_value()?);
                        }
                    }
                    Ok(Head(head))
                }
            }
            d.deserialize_map(Visit)
        }
    }
    let head: Head = serde_json::from_str(plan_json).ok()?;
    serde_json::to_string(&head.0).ok()
}

fn insert_trials(c: &mut dyn Conn, id: &str, trials: &[PlannedTrialRow]) -> Result<(), DbError> {
    for t in trials {
        c.execute(
            "INSERT INTO trials (campaign, idx, key, device, device_model, variant, build, config, repeat, block,
                device_order)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            &vals![
                id,
                t.idx,
                &t.key,
                &t.device,
                &t.device_model,
                &t.variant,
                &t.build,
                &t.config,
                t.repeat,
                t.block,
                t.device_order
            ],
        )?;
    }
    Ok(())
}

/// A campaign's retry limit (`None`: no such campaign).
fn retry_limit(c: &mut dyn Conn, id: &str) -> Result<Option<u32>, DbError> {
    c.query_opt("SELECT max_attempts FROM campaigns WHERE id = ?1", &vals![id])?.map(|r| r.get(0)).transpose()
}

/// Each trial of a campaign with its attempts and valid ones (`SUM` cast: PostgreSQL
/// would widen it to `numeric`), grouped by the trials' key.
const TRIAL_COUNTS: &str =
    "COUNT(a.attempt), CAST(COALESCE(SUM(CASE WHEN a.status = 'valid' THEN 1 ELSE 0 END), 0) AS BIGINT)
     FROM trials t LEFT JOIN attempts a ON a.campaign = t.campaign AND a.trial_idx = t.idx
     WHERE t.campaign = ?1 GROUP BY t.campaign, t.idx";

/// A trial's outcome from its attempts and how many of them were valid.
pub(super) fn outcome(attempts: u32, valid: u32, max_attempts: u32) -> TrialOutcome {
    if valid > 0 {
        TrialOutcome::Valid
    } else if attempts >= max_attempts {
        TrialOutcome::Failed
    } else {
        TrialOutcome::Pending
    }
}

/// Writes one attempt's rows, inside the caller's transaction. The `attempts` row goes first, and with `OR IGNORE`: an
/// attempt that is already there is a `Duplicate` before anything of it is written, so a
/// transaction of many attempts needs no savepoint for it (`batch::record`).
fn insert_attempt(tx: &rusqlite::Transaction<'_>, a: &EncodedAttempt) -> Result<(), StoreError> {
    let inserted = tx
        .prepare_cached(
            "INSERT OR IGNORE INTO attempts (campaign, trial_idx, attempt, status, reasons, phases, started_at, ended_at,
            soak_start_s, artifact_dir, state_before, state_after, device, untether, labels, state_soak)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )?
        .execute(params![
            a.campaign,
            a.trial_idx,
            a.attempt,
            a.status.as_str(),
            a.reasons,
            a.phases,
            a.started_at,
            a.ended_at,
            a.soak_start_s,
            a.artifact_dir,
            a.state_before,
            a.state_after,
            a.device,
            a.untether.map(UntetherMode::as_str),
            a.labels,
            a.state_soak
        ])?;
    if inserted == 0 {
        return Err(StoreError::Duplicate { campaign: a.campaign.clone(), trial: a.trial_idx, attempt: a.attempt });
    }
    // The attempt's rows get consecutive ids (one connection writes them, in a row); its
    // `attempt_report` row holds their ranges.
    let mut measurements = None;
    {
        let mut st = tx.prepare_cached(
            "INSERT INTO measurements (campaign, trial_idx, attempt, seq, metric, value, unit, source)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for (seq, m) in a.measurements.iter().enumerate() {
            st.execute(params![a.campaign, a.trial_idx, a.attempt, seq as u32, m.metric, m.value, m.unit, m.source])?;
            let id = tx.last_insert_rowid();
            measurements = Some((measurements.map_or(id, |(from, _)| from), id));
        }
    }
    let mut series = None;
    {
        let mut st = tx.prepare_cached(
            "INSERT INTO series (campaign, trial_idx, attempt, seq, name, unit, source, points)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for (seq, s) in a.series.iter().enumerate() {
            st.execute(params![a.campaign, a.trial_idx, a.attempt, seq as u32, s.name, s.unit, s.source, s.points])?;
            let id = tx.last_insert_rowid();
            series = Some((series.map_or(id, |(from, _)| from), id));
        }
    }
    tx.prepare_cached(
        "INSERT INTO attempt_report (campaign, trial_idx, attempt, status, device, untether, soak_start_s, phases,
            reasons, labels, state_digest, battery, measurements_from, measurements_to, series_from, series_to)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    )?
    .execute(params![
        a.campaign,
        a.trial_idx,
        a.attempt,
        a.status.as_str(),
        a.device,
        a.untether.map(UntetherMode::as_str),
        a.soak_start_s,
        a.phases,
        a.reasons,
        a.labels,
        a.state_digest,
        a.series.iter().any(SeriesRow::is_battery),
        measurements.map(|(from, _)| from),
        measurements.map(|(_, to)| to),
        series.map(|(from, _)| from),
        series.map(|(_, to)| to)
    ])?;
    if !a.attestations.is_empty() {
        super::operator_steps::insert_attestations(tx, &a.campaign, a.trial_idx, a.attempt, &a.attestations)?;
    }
    Ok(())
}

/// Hands rows keyed by (trial, attempt) to their attempts. Both are ordered by that key:
/// one pass.
pub(super) fn merge<T>(
    attempts: &mut [AttemptRecord],
    rows: impl IntoIterator<Item = ((u32, u32), T)>,
    put: impl Fn(&mut AttemptRecord, T),
) {
    let mut i = 0;
    for (key, row) in rows {
        while i < attempts.len() && (attempts[i].trial_idx, attempts[i].attempt) < key {
            i += 1;
        }
        if i < attempts.len() && (attempts[i].trial_idx, attempts[i].attempt) == key {
            put(&mut attempts[i], row);
        }
    }
}

/// [`Store::attempts`] on `c`.
fn attempt_records(c: &mut dyn Conn, id: &str) -> Result<Vec<AttemptRecord>, StoreError> {
    let attested = super::operator_steps::attestation_rows(c, id)?;
    let mut out: Vec<AttemptRecord> = Vec::new();
    c.query_each(
        "SELECT a.trial_idx, a.attempt, a.status, a.reasons, a.phases, a.started_at, a.ended_at, a.soak_start_s,
                a.artifact_dir, a.state_before, a.state_after, COALESCE(a.device, t.device), a.untether, a.labels, a.state_soak
         FROM attempts a JOIN trials t ON t.campaign = a.campaign AND t.idx = a.trial_idx
         WHERE a.campaign = ?1 ORDER BY a.trial_idx, a.attempt",
        &vals![id],
        &mut |r| {
            let json = |i: usize| r.text(i).map(|t| t.unwrap_or(""));
            out.push(AttemptRecord {
                campaign: id.to_string(),
                trial_idx: r.get(0)?,
                attempt: r.get(1)?,
                device: r.get(11)?,
                status: if json(2)? == "valid" { AttemptStatus::Valid } else { AttemptStatus::Invalid },
                reasons: serde_json::from_str(json(3)?).unwrap_or_default(),
                phases: serde_json::from_str(json(4)?).unwrap_or_default(),
                started_at: r.get(5)?,
                ended_at: r.get(6)?,
                soak_start_s: r.get(7)?,
                artifact_dir: r.get(8)?,
                measurements: Vec::new(),
                series: Vec::new(),
                state_before: serde_json::from_str(json(9)?).unwrap_or_default(),
                state_after: serde_json::from_str(json(10)?).unwrap_or_default(),
                state_soak: r.text(14)?.and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default(),
                untether: r.text(12)?.and_then(UntetherMode::parse),
                labels: serde_json::from_str(json(13)?).unwrap_or_default(),
                attestations: Vec::new(),
            });
            Ok(())
        },
    )?;
    let mut measurements = Vec::new();
    c.query_each(MEASUREMENTS_OF_CAMPAIGN, &vals![id], &mut |r| {
        let m = Measurement { metric: r.get(2)?, value: r.get(3)?, unit: r.get(4)?, source: r.get(5)? };
        measurements.push(((r.get(0)?, r.get(1)?), m));
        Ok(())
    })?;
    merge(&mut out, measurements, |a, m| a.measurements.push(m));
    let series = series_rows(c, id)?.into_iter().map(|s| ((s.trial_idx, s.attempt), s.series));
    merge(&mut out, series, |a, s| a.series.push(s));
    merge(&mut out, attested, |a, x| a.attestations.push(x));
    Ok(out)
}

/// A campaign's series, in (trial, attempt, seq) order: each attempt's `attempt_report`
/// row, then its range of series ids (the key is checked all the same).
pub(super) const SERIES_OF_CAMPAIGN: &str = "
    SELECT s.trial_idx, s.attempt, s.name, s.unit, s.source, s.points
    FROM attempt_report r JOIN series s ON s.id BETWEEN r.series_from AND r.series_to
    WHERE r.campaign = ?1 AND s.campaign = r.campaign AND s.trial_idx = r.trial_idx AND s.attempt = r.attempt
    ORDER BY r.trial_idx, r.attempt, s.seq";

/// A campaign's measurements as `SERIES_OF_CAMPAIGN` reads its series.
pub(super) const MEASUREMENTS_OF_CAMPAIGN: &str = "
    SELECT m.trial_idx, m.attempt, m.metric, m.value, m.unit, m.source
    FROM attempt_report r JOIN measurements m ON m.id BETWEEN r.measurements_from AND r.measurements_to
    WHERE r.campaign = ?1 AND m.campaign = r.campaign AND m.trial_idx = r.trial_idx AND m.attempt = r.attempt
    ORDER BY r.trial_idx, r.attempt, m.seq";

fn series_rows(c: &mut dyn Conn, id: &str) -> Result<Vec<AttemptSeries>, StoreError> {
    let mut out = Vec::new();
    c.query_each(SERIES_OF_CAMPAIGN, &vals![id], &mut |r| {
        let points = Series::points_from_blob(r.blob(5).unwrap_or_default())
            .map_err(|e| DbError::Type(format!("a series' points: {e}")))?;
        out.push(AttemptSeries {
            trial_idx: r.get(0)?,
            attempt: r.get(1)?,
            series: Series { name: r.get(2)?, unit: r.get(3)?, source: r.get(4)?, points },
        });
        Ok(())
    })?;
    Ok(out)
}

impl Store {
    /// Opens (creating if needed) the store at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
                path: path.to_path_buf(),
                source: rusqlite::Error::ToSqlConversionFailure(Box::new(e)),
            })?;
        }
        Self::open_inner(path)
    }

    /// Opens an existing store; never creates one (for read-only commands).
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing { path: path.to_path_buf() });
        }
        Self::open_inner(path)
    }

    fn open_inner(path: &Path) -> Result<Store, StoreError> {
        let err = |source| StoreError::Open { path: path.to_path_buf(), source };
        let mut conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
        // NORMAL in WAL mode is durable across process crashes (kill -9); only a
        // power loss can lose the last transactions.
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(err)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(err)?;
        // A checkpoint every 8 000 log pages (32 MB) instead of SQLite's 1 000. It runs
        // inside a commit, on the thread every device's attempt waits on, and ends with two
        // `fsync`s; rarer, it also copies a page rewritten by many commits once. On a
        // 10 000-trial simulated campaign on this project's VM's disk the transactions that
        // recorded attempts took 1.1-1.4 s instead of 1.7-2.1 s. (A thread checkpointing
        // beside the writer was tried: it copied the same pages again and again and cost
        // more CPU than it saved the writer.)
        conn.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES).map_err(err)?;
        schema::migrate(&mut conn).map_err(err)?;
        let conn = Arc::new(Mutex::new(conn));
        Ok(Store {
            db: super::backend::Db::Sqlite(conn.clone()),
            conn: Some(conn),
            locks: Arc::new(super::backend::FileLocks { dir: lock_dir(path) }),
            path: path.to_path_buf(),
            attempts: Arc::default(),
            commits: Arc::default(),
            recording_ns: Arc::default(),
        })
    }

    /// Opens the PostgreSQL store at `url` and brings its schema up to date (several
    /// processes may do so at once).
    pub fn open_postgres(url: &super::PgUrl) -> Result<Store, StoreError> {
        let owner = super::PgOwner::connect_reconnecting(&url.named("lab"))
            .map_err(|e| StoreError::Unreachable(e.to_string()))?;
        owner.call(super::backend::migrate_postgres)?;
        Ok(Store {
            db: super::backend::Db::Postgres(Arc::new(owner)),
            conn: None,
            locks: Arc::new(super::backend::PgLocks::new(url)?),
            path: PathBuf::from(url.shown()),
            attempts: Arc::default(),
            commits: Arc::default(),
            recording_ns: Arc::default(),
        })
    }

    /// The SQLite file, or the PostgreSQL URL as shown (without its password).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Which backend this store is on.
    pub fn dialect(&self) -> super::Dialect {
        match self.db {
            super::backend::Db::Sqlite(_) => super::Dialect::Sqlite,
            super::backend::Db::Postgres(_) => super::Dialect::Postgres,
        }
    }

    /// A number that changes when another connection (another process's `lab run`)
    /// commits a write. SQLite: `PRAGMA data_version`, which never moves for this
    /// connection's own commits. PostgreSQL: the notifications the tables' triggers send
    /// at every commit that wrote, to this database's listeners alone. Costs no table read,
    /// so a watcher can ask it every second.
    pub fn data_version(&self) -> Result<i64, StoreError> {
        Ok(self.db.call(|c| c.data_version())?)
    }

    /// SQLite's own connection, for what is done on SQLite alone: its borrowed, parallel
    /// read of a campaign's columns, its batched attempt commits, and tests.
    #[track_caller]
    pub(super) fn lock(&self) -> Result<std::sync::MutexGuard<'_, Connection>, StoreError> {
        match &self.conn {
            // A panic while holding the lock leaves a connection that is still usable:
            // every write is its own transaction.
            Some(conn) => Ok(conn.lock().unwrap_or_else(|p| p.into_inner())),
            None => Err(StoreError::Internal(format!(
                "{}: a SQLite-only path was taken on the PostgreSQL store {}",
                std::panic::Location::caller(),
                self.path.display()
            ))),
        }
    }

    /// Inserts a campaign and its planned trials in one transaction.
    pub fn create_campaign(&self, c: &NewCampaign, max_attempts: u32, pid: u32) -> Result<(), StoreError> {
        let row = vals![
            &c.id,
            &c.runbook_name,
            &c.runbook_path,
            &c.runbook_text,
            &c.runbook_sha256,
            &c.lab_text,
            &c.lab_sha256,
            json_text(&c.content_hashes),
            &c.tool_version,
            c.seed as i64,
            &c.created_at,
            pid,
            &c.plan_json,
            max_attempts,
            plan_head(&c.plan_json),
            ProcessId::of(pid).start_column()
        ];
        let (id, trials) = (c.id.clone(), c.planned_trials.clone());
        self.db.call(move |conn| {
            conn.transaction(|conn| {
                conn.execute(
                    "INSERT INTO campaigns (id, runbook_name, runbook_path, runbook_text, runbook_sha256, lab_text,
                        lab_sha256, content_hashes, tool_version, seed, created_at, status, runner_pid, plan_json,
                        max_attempts, plan_head, runner_start)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'running', ?12, ?13, ?14, ?15, ?16)",
                    &row,
                )?;
                insert_trials(conn, &id, &trials)
            })
        })?;
        Ok(())
    }

    /// Adds planned trials to a campaign and stores its new plan, in one transaction
    /// (adaptive repeats): a resumed run sees both or neither.
    pub fn add_trials(&self, id: &str, trials: &[PlannedTrialRow], plan_json: &str) -> Result<(), StoreError> {
        let row = vals![id, plan_json, plan_head(plan_json)];
        let (campaign, trials) = (id.to_string(), trials.to_vec());
        let found = self.db.call(move |c| {
            c.transaction(|c| {
                if c.execute("UPDATE campaigns SET plan_json = ?2, plan_head = ?3 WHERE id = ?1", &row)? == 0 {
                    return Ok(false);
                }
                insert_trials(c, &campaign, &trials)?;
                Ok(true)
            })
        })?;
        if !found {
            return Err(StoreError::NoCampaign(id.into()));
        }
        Ok(())
    }

    /// A campaign's row, [`HEAD_COLUMNS`] then (with `plan`) `plan_json`; without it the
    /// record's `plan_json` is left `Null` (unparsed).
    fn campaign_fields(r: &Row, plan: bool) -> Result<(CampaignRecord, u32), DbError> {
        let parse = |s: String| serde_json::from_str(&s).unwrap_or(serde_json::Value::Null);
        let status: String = r.get(12)?;
        let footprint: Option<String> = r.get(16)?;
        Ok((
            CampaignRecord {
                id: r.get(0)?,
                runbook_name: r.get(1)?,
                runbook_path: r.get(2)?,
                runbook_text: r.get(3)?,
                runbook_sha256: r.get(4)?,
                lab_text: r.get(5)?,
                lab_sha256: r.get(6)?,
                content_hashes: parse(r.get(7)?),
                tool_version: r.get(8)?,
                seed: r.get::<i64>(9)? as u64,
                created_at: r.get(10)?,
                finished_at: r.get(11)?,
                status: CampaignStatus::parse(&status).unwrap_or(CampaignStatus::Interrupted),
                runner_pid: r.get(13)?,
                runner_start: start_from_column(r.get(14)?),
                note: r.get(15)?,
                plan_json: if plan { parse(r.get(18)?) } else { serde_json::Value::Null },
                footprint_json: footprint.map(parse),
            },
            r.get(17)?,
        ))
    }

    /// Campaigns: `SELECT {HEAD_COLUMNS}[, plan_json] FROM campaigns {tail}`.
    fn campaign_rows(&self, plan: bool, tail: &str, params: Vec<Value>) -> Result<Vec<CampaignRecord>, StoreError> {
        let sql = format!("SELECT {HEAD_COLUMNS}{} FROM campaigns {tail}", if plan { ", plan_json" } else { "" });
        let rows = self.db.call(move |c| c.query(&sql, &params))?;
        Ok(rows.iter().map(|r| Self::campaign_fields(r, plan).map(|(c, _)| c)).collect::<Result<_, _>>()?)
    }

    /// A campaign with its `plan_json` left `Null` and not read.
    pub fn campaign_without_plan(&self, id: &str) -> Result<CampaignRecord, StoreError> {
        self.campaign_rows(false, "WHERE id = ?1", vals![id].to_vec())?
            .pop()
            .ok_or_else(|| StoreError::NoCampaign(id.to_string()))
    }

    /// A campaign with its `plan_json` left `Null`, and the text of its plan's head (the
    /// plan without its trials, for `Plan::head_from_json`; the whole plan's text for a
    /// campaign whose head is not stored): a plan of 144 000 trials is 29 MB of text, and
    /// a report needs only its head.
    pub fn campaign_head(&self, id: &str) -> Result<(CampaignRecord, String), StoreError> {
        let sql = format!("SELECT {HEAD_COLUMNS}, COALESCE(plan_head, plan_json) FROM campaigns WHERE id = ?1");
        let params = vals![id];
        let row = self.db.call(move |c| c.query_opt(&sql, &params))?;
        let row = row.ok_or_else(|| StoreError::NoCampaign(id.into()))?;
        Ok((Self::campaign_fields(&row, false)?.0, row.get(18)?))
    }

    pub fn campaign(&self, id: &str) -> Result<CampaignRecord, StoreError> {
        self.campaign_rows(true, "WHERE id = ?1", vals![id].to_vec())?
            .pop()
            .ok_or_else(|| StoreError::NoCampaign(id.to_string()))
    }

    /// The newest campaign's id (as `campaigns()` orders them), without reading any plan.
    pub fn latest_campaign_id(&self) -> Result<Option<String>, StoreError> {
        let row =
            self.db.call(|c| c.query_opt("SELECT id FROM campaigns ORDER BY created_at DESC, id DESC LIMIT 1", &[]))?;
        Ok(row.map(|r| r.get(0)).transpose()?)
    }

    /// All campaigns, newest first.
    pub fn campaigns(&self) -> Result<Vec<CampaignRecord>, StoreError> {
        self.campaign_rows(true, "ORDER BY created_at DESC, id DESC", Vec::new())
    }

    /// A text that changes whenever what a campaign's report shows can: its row's status,
    /// end, note and footprint, its trials (count, queue order, every moved trial) and its attempts
    /// (count and newest row; attempts, their measurements and attestations are only ever
    /// inserted, together). Equal stamps: the report files written with the first are
    /// still those the store gives.
    pub fn report_stamp(&self, id: &str) -> Result<String, StoreError> {
        let id = id.to_string();
        self.db.call(move |c| Ok(report_stamp_on(c, &id)))?
    }

    /// All campaigns, newest first, each with its `plan_json` left `Null` (unparsed): what
    /// lists of campaigns need, at no cost per planned trial.
    pub fn campaign_list(&self) -> Result<Vec<CampaignRecord>, StoreError> {
        self.campaign_rows(false, "ORDER BY created_at DESC, id DESC", Vec::new())
    }

    /// A campaign id not yet taken: `<prefix>-<UTC yyyymmdd-hhmmss>`, with `-2`, `-3`, …
    /// appended while that is taken.
    pub fn free_campaign_id(&self, prefix: &str) -> Result<String, StoreError> {
        let base = format!("{prefix}-{}", chrono::Utc::now().format("%Y%m%d-%H%M%S"));
        let rows = self.db.call(|c| c.query("SELECT id FROM campaigns", &[]))?;
        let taken: Vec<String> = rows.iter().map(|r| r.get(0)).collect::<Result<_, _>>()?;
        let mut id = base.clone();
        let mut n = 2;
        while taken.contains(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        Ok(id)
    }

    /// Marks a campaign as being worked on by process `pid` (a new run or a resume).
    pub fn set_running(&self, id: &str, pid: u32) -> Result<(), StoreError> {
        let row = vals![id, pid, ProcessId::of(pid).start_column()];
        let n = self.db.call(move |c| {
            c.execute(
                "UPDATE campaigns SET status = 'running', runner_pid = ?2, runner_start = ?3, finished_at = NULL,
                    note = NULL
                 WHERE id = ?1",
                &row,
            )
        })?;
        if n == 0 {
            return Err(StoreError::NoCampaign(id.into()));
        }
        Ok(())
    }

    pub fn finish_campaign(
        &self,
        id: &str,
        status: CampaignStatus,
        finished_at: &str,
        note: Option<&str>,
        footprint: Option<&serde_json::Value>,
    ) -> Result<(), StoreError> {
        let row = vals![id, status.as_str(), finished_at, note, footprint.map(json_text)];
        self.db.call(move |c| {
            c.execute(
                "UPDATE campaigns SET status = ?2, finished_at = ?3, note = ?4, runner_pid = NULL, runner_start = NULL,
                    footprint_json = COALESCE(?5, footprint_json) WHERE id = ?1",
                &row,
            )
        })?;
        Ok(())
    }

    /// A campaign's retry limit and `SELECT {columns}, {TRIAL_COUNTS} ORDER BY {order}`, read
    /// in one transaction (one snapshot).
    fn trial_counts(&self, id: &str, columns: &str, order: &str) -> Result<(u32, Vec<Row>), StoreError> {
        let sql =
            format!("SELECT {columns}{}{TRIAL_COUNTS} ORDER BY {order}", if columns.is_empty() { "" } else { ", " });
        let id_ = id.to_string();
        let (limit, rows) =
            self.db.call(move |c| c.read_transaction(|c| Ok((retry_limit(c, &id_)?, c.query(&sql, &vals![&id_])?))))?;
        Ok((limit.ok_or_else(|| StoreError::NoCampaign(id.into()))?, rows))
    }

    /// Planned trials with their outcome so far, in plan order.
    pub fn trials(&self, id: &str) -> Result<Vec<TrialRecord>, StoreError> {
        let (max_attempts, rows) = self.trial_counts(
            id,
            "t.idx, t.key, t.device, t.device_model, t.variant, t.build, t.config, t.repeat, t.block, t.device_order",
            "t.idx",
        )?;
        let trial = |r: &Row| -> Result<TrialRecord, DbError> {
            let (attempts, valid): (u32, u32) = (r.get(10)?, r.get(11)?);
            Ok(TrialRecord {
                row: PlannedTrialRow {
                    idx: r.get(0)?,
                    key: r.get(1)?,
                    device: r.get(2)?,
                    device_model: r.get(3)?,
                    variant: r.get(4)?,
                    build: r.get(5)?,
                    config: r.get(6)?,
                    repeat: r.get(7)?,
                    block: r.get(8)?,
                    device_order: r.get(9)?,
                },
                attempts,
                outcome: outcome(attempts, valid, max_attempts),
            })
        };
        Ok(rows.iter().map(trial).collect::<Result<_, _>>()?)
    }

    /// What is left to run, per device (by name), with each device's trials in queue
    /// order: only indices and attempt counts, so a round holds no copy of the plan's rows.
    pub fn pending_queue(&self, id: &str) -> Result<Vec<DeviceQueue>, StoreError> {
        let (max_attempts, rows) = self.trial_counts(id, "t.device, t.idx", "t.device, t.device_order")?;
        let mut out: Vec<DeviceQueue> = Vec::new();
        for r in &rows {
            let device: String = r.get(0)?;
            if out.last().is_none_or(|q| q.device != device) {
                out.push(DeviceQueue { device, planned: 0, done: 0, pending: Vec::new() });
            }
            let (idx, attempts, valid): (u32, u32, u32) = (r.get(1)?, r.get(2)?, r.get(3)?);
            let q = out.last_mut().expect("pushed above");
            q.planned += 1;
            if outcome(attempts, valid, max_attempts) == TrialOutcome::Pending {
                q.pending.push((idx, attempts));
            } else {
                q.done += 1;
            }
        }
        Ok(out)
    }

    /// How a campaign's trials stand, in one aggregate query.
    pub fn outcome_counts(&self, id: &str) -> Result<OutcomeCounts, StoreError> {
        let (max_attempts, rows) = self.trial_counts(id, "", "t.idx")?;
        let mut c = OutcomeCounts::default();
        for r in &rows {
            let (attempts, valid): (u32, u32) = (r.get(0)?, r.get(1)?);
            c.attempts += attempts;
            match outcome(attempts, valid, max_attempts) {
                TrialOutcome::Valid => c.valid += 1,
                TrialOutcome::Failed => c.failed += 1,
                TrialOutcome::Pending => c.pending += 1,
            }
        }
        Ok(c)
    }

    /// Gives pending trials to other devices, in one transaction; the first device each
    /// was planned on is kept in `moved_from`. A trial that already has a valid attempt
    /// is left where it is.
    pub fn move_trials(&self, id: &str, moves: &[TrialMove]) -> Result<usize, StoreError> {
        let rows: Vec<_> = moves.iter().map(|m| vals![id, m.trial_idx, &m.to_device, m.device_order]).collect();
        let moved = self.db.call(move |c| {
            c.transaction(|c| {
                let mut moved = 0;
                for row in &rows {
                    moved += c.execute(
                        "UPDATE trials SET moved_from = COALESCE(moved_from, device), device = ?3, device_order = ?4
                         WHERE campaign = ?1 AND idx = ?2 AND NOT EXISTS (
                             SELECT 1 FROM attempts a WHERE a.campaign = ?1 AND a.trial_idx = ?2 AND a.status = 'valid')",
                        row,
                    )?;
                }
                Ok(moved)
            })
        })?;
        Ok(moved as usize)
    }

    /// Trial index → the device it was first planned on, for trials that moved.
    pub fn moved_trials(&self, id: &str) -> Result<Vec<(u32, String)>, StoreError> {
        let id = vals![id];
        let rows = self.db.call(move |c| {
            c.query(
                "SELECT idx, moved_from FROM trials WHERE campaign = ?1 AND moved_from IS NOT NULL ORDER BY idx",
                &id,
            )
        })?;
        Ok(rows.iter().map(|r| Ok((r.get(0)?, r.get(1)?))).collect::<Result<_, DbError>>()?)
    }

    /// Records one attempt, its measurements and its series atomically: after a crash it is
    /// either wholly there or not at all. Attempts recorded at the same time by other
    /// threads share one transaction (`batch`); this returns once the transaction that
    /// holds `a` is committed.
    pub fn record_attempt(&self, a: AttemptRecord) -> Result<(), StoreError> {
        self.record_attempts(vec![a])
            .pop()
            .unwrap_or_else(|| Err(StoreError::Internal("attempt left out of its transaction".into())))
    }

    /// Records each of `all` as `record_attempt` does, in one transaction with whatever
    /// else is queued; each gets its own result (a duplicate fails alone).
    pub fn record_attempts(&self, all: Vec<AttemptRecord>) -> Vec<Result<(), StoreError>> {
        self.record_rows(all.into_iter().map(EncodedAttempt::encode).collect())
    }

    /// Records attempts encoded by their callers (`EncodedAttempt::encode`, on the caller's
    /// thread), as `record_attempts` does.
    pub fn record_rows(&self, all: Vec<EncodedAttempt>) -> Vec<Result<(), StoreError>> {
        let tickets = self.attempts.push_all(all);
        // Done: another caller took the queue, and with it all of these, and committed them;
        // `turn` hands over the first one's result, the others wait in their tickets.
        let mut first = None;
        if let Some(t) = tickets.first() {
            // SQLite: the turn is taken under the connection's lock, so one thread records
            // while the others queue; PostgreSQL: its connection's thread does the same.
            let mut conn = self.conn.as_ref().map(|c| c.lock().unwrap_or_else(|p| p.into_inner()));
            match self.attempts.turn(t) {
                Turn::Done(r) => first = Some(r),
                Turn::Record(jobs) => {
                    let start = std::time::Instant::now();
                    let commits = match &mut conn {
                        Some(conn) => batch::record(conn, jobs, insert_attempt),
                        None => {
                            // Run once: a second run on a new connection would find no jobs
                            // (each attempt was told the connection was lost; the recorder
                            // tries those again).
                            let mut jobs = Some(jobs);
                            self.db
                                .call(move |c| Ok(jobs.take().map_or(0, |j| super::pg_record::record(c, j))))
                                .unwrap_or(0)
                        }
                    };
                    self.commits.fetch_add(commits, Ordering::Relaxed);
                    let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    self.recording_ns.fetch_add(ns, Ordering::Relaxed);
                }
            }
        }
        tickets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let done = if i == 0 { first.take() } else { None };
                let done = done.or_else(|| t.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take());
                done.unwrap_or_else(|| Err(StoreError::Internal("attempt left out of its transaction".into())))
            })
            .collect()
    }

    /// Commits made by `record_attempt` and `set_device_statuses` since the store was
    /// opened (how well they are batched: the benchmark prints it).
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Wall time spent in the transactions that recorded attempts since the store was
    /// opened: how busy the one connection every device waits on was.
    pub fn recording_time(&self) -> Duration {
        Duration::from_nanos(self.recording_ns.load(Ordering::Relaxed))
    }

    /// Every series of a campaign's attempts, ordered by trial, attempt and as recorded.
    /// Attempts recorded before the store kept series (schema 3) have none.
    pub fn series(&self, id: &str) -> Result<Vec<AttemptSeries>, StoreError> {
        let id = id.to_string();
        self.db.call(move |c| c.read_transaction(|c| Ok(series_rows(c, &id))))?
    }

    /// Every attempt of a campaign with its measurements and series, ordered by trial and attempt.
    pub fn attempts(&self, id: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        let id = id.to_string();
        self.db.call(move |c| c.read_transaction(|c| Ok(attempt_records(c, &id))))?
    }

    pub fn set_device_status(&self, s: &DeviceStatusRow) -> Result<(), StoreError> {
        self.set_device_statuses(std::slice::from_ref(s))
    }

    /// Writes what `lab status` shows for several devices in one transaction. A row
    /// without a battery reading keeps the last one stored.
    pub fn set_device_statuses(&self, rows: &[DeviceStatusRow]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let rows: Vec<_> = rows
            .iter()
            .map(|s| {
                vals![
                    &s.device,
                    &s.state,
                    s.battery_pct,
                    s.campaign.clone(),
                    s.trial_key.clone(),
                    s.phase.clone(),
                    &s.updated_at
                ]
            })
            .collect();
        self.db.call(move |c| {
            c.transaction(|c| {
                for row in &rows {
                    c.execute(
                        "INSERT INTO device_status (device, state, battery_pct, campaign, trial_key, phase, updated_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                         ON CONFLICT(device) DO UPDATE SET state = ?2,
                            battery_pct = COALESCE(?3, device_status.battery_pct), campaign = ?4, trial_key = ?5,
                            phase = ?6, updated_at = ?7",
                        row,
                    )?;
                }
                Ok(())
            })
        })?;
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub fn device_statuses(&self) -> Result<Vec<DeviceStatusRow>, StoreError> {
        let rows = self.db.call(|c| {
            c.query(
                "SELECT device, state, battery_pct, campaign, trial_key, phase, updated_at FROM device_status
                 ORDER BY device",
                &[],
            )
        })?;
        let status = |r: &Row| -> Result<DeviceStatusRow, DbError> {
            Ok(DeviceStatusRow {
                device: r.get(0)?,
                state: r.get(1)?,
                battery_pct: r.get(2)?,
                campaign: r.get(3)?,
                trial_key: r.get(4)?,
                phase: r.get(5)?,
                updated_at: r.get(6)?,
            })
        };
        Ok(rows.iter().map(status).collect::<Result<_, _>>()?)
    }

    pub fn add_battery_reading(&self, r: &BatteryReadingRow) -> Result<(), StoreError> {
        let row = vals![&r.device, &r.at, r.battery_pct, r.health_pct, r.cycle_count, &r.source];
        self.db.call(move |c| {
            c.execute(
                "INSERT INTO battery_readings (device, at, battery_pct, health_pct, cycle_count, source)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                &row,
            )
        })?;
        Ok(())
    }

    /// Every reading of `device`, oldest first (two at one time in the order written).
    pub fn battery_readings(&self, device: &str) -> Result<Vec<BatteryReadingRow>, StoreError> {
        let device = device.to_string();
        let rows = self.db.call(move |c| {
            let order = if c.dialect() == super::Dialect::Sqlite { "rowid" } else { "id" };
            c.query(
                &format!(
                    "SELECT device, at, battery_pct, health_pct, cycle_count, source FROM battery_readings
                     WHERE device = ?1 ORDER BY at, {order}"
                ),
                &vals![&device],
            )
        })?;
        let reading = |r: &Row| -> Result<BatteryReadingRow, DbError> {
            Ok(BatteryReadingRow {
                device: r.get(0)?,
                at: r.get(1)?,
                battery_pct: r.get(2)?,
                health_pct: r.get(3)?,
                cycle_count: r.get(4)?,
                source: r.get(5)?,
            })
        };
        Ok(rows.iter().map(reading).collect::<Result<_, _>>()?)
    }
}

/// [`Store::report_stamp`] on `c` (inside a read transaction: the stamp of what it reads).
/// Attempts are only ever inserted: their count and newest row change with each.
pub(super) fn report_stamp_on(c: &mut dyn Conn, id: &str) -> Result<String, StoreError> {
    let head = stamp_head(c, id)?;
    // SQLite's newest attempt is its highest rowid; PostgreSQL, whose rows have no row id,
    // counts them in `attempt_report` (one row each, written with it; scanning the wide
    // `attempts` was a tenth of a report's time there) with the newest measurement id.
    let (moved, newest, attempts) = match c.dialect() {
        super::Dialect::Sqlite => {
            ("group_concat(idx || ':' || device || ':' || device_order, ',')", "rowid", "attempts")
        }
        super::Dialect::Postgres => (
            "string_agg(idx || ':' || device || ':' || device_order, ',' ORDER BY idx)",
            "measurements_to",
            "attempt_report",
        ),
    };
    let sql = format!(
        "SELECT (SELECT count(*) FROM trials WHERE campaign = ?1),
                -- Trials are only inserted with their campaign, and a move is the one
                -- update of a trial after that: the moved ones in full (index trials_moved).
                (SELECT COALESCE({moved}, '') FROM trials WHERE campaign = ?1 AND moved_from IS NOT NULL),
                (SELECT count(*) FROM {attempts} WHERE campaign = ?1),
                (SELECT max({newest}) FROM {attempts} WHERE campaign = ?1)"
    );
    let row = c.query_opt(&sql, &vals![id])?.ok_or_else(|| StoreError::NoCampaign(id.into()))?;
    let moved: String = row.get(1)?;
    let count = |i: usize| row.get::<i64>(i).map(|n| n as u64);
    Ok(stamp_text(&head, count(0)?, &moved, count(2)?, row.get(3)?))
}

/// The campaign's own part of its report stamp (its status, end, note, footprint and
/// runbook digest).
pub(super) fn stamp_head(c: &mut dyn Conn, id: &str) -> Result<String, StoreError> {
    c.query_opt(
        "SELECT status || '|' || COALESCE(finished_at, '') || '|' || COALESCE(note, '') || '|'
                || COALESCE(footprint_json, '') || '|' || runbook_sha256
         FROM campaigns WHERE id = ?1",
        &vals![id],
    )?
    .ok_or_else(|| StoreError::NoCampaign(id.into()))?
    .get(0)
    .map_err(Into::into)
}

/// A report stamp from its parts: the campaign's head, its trials' count, the moved ones
/// (`idx:device:order`, by idx, comma-separated), its attempts' count and newest.
pub(super) fn stamp_text(head: &str, trials: u64, moved: &str, attempts: u64, newest: Option<i64>) -> String {
    let newest = newest.map(|n| n.to_string()).unwrap_or_default();
    format!("{head}|{trials}|{moved}|{attempts}/{newest}")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::MIGRATIONS;

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
    );

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
    fn other_handle(s: &Store) -> Store {
        match &s.db {
            crate::store::backend::Db::Sqlite(_) => Store::open(s.path()).unwrap(),
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
        let ranges = s
            .db
            .call(|c| {
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
        assert_eq!(
            outcomes,
            [(0, 1, TrialOutcome::Valid), (1, 2, TrialOutcome::Failed), (2, 0, TrialOutcome::Pending)]
        );
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
        let (a, b, c) =
            (s.ask_step(&ask("a")).unwrap(), s.ask_step(&ask("b")).unwrap(), s.ask_step(&ask("c")).unwrap());
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
            [
                (0, TrialOutcome::Valid),
                (1, TrialOutcome::Pending),
                (2, TrialOutcome::Pending),
                (3, TrialOutcome::Pending)
            ]
        );
        assert_eq!(
            s.campaign("c1").unwrap().plan_json,
            serde_json::json!({"x": 2, "trials": [{"idx": 2}, {"idx": 3}]})
        );
        // A clash rolls the whole change back: the plan stays as it was.
        assert!(s.add_trials("c1", &[trial(4), trial(0)], r#"{"x":3}"#).is_err());
        assert_eq!(s.trials("c1").unwrap().len(), 4);
        assert_eq!(
            s.campaign("c1").unwrap().plan_json,
            serde_json::json!({"x": 2, "trials": [{"idx": 2}, {"idx": 3}]})
        );
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
        let stored: Vec<_> =
            s.attempts("c1").unwrap().into_iter().map(|a| (a.trial_idx, a.measurements.len())).collect();
        assert_eq!(stored, [(0, 2), (2, 2), (3, 2)], "nothing of trial 1: no row, no measurement");
        let reports: u32 =
            s.lock().unwrap().query_row("SELECT count(*) FROM attempt_report", [], |r| r.get(0)).unwrap();
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
            let conn = super::super::schema::open_at_version(&path, 1);
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
            let conn = super::super::schema::open_at_version(&path, 2);
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
        assert_eq!(
            (a[0].untether, a[0].labels.len()),
            (None, 0),
            "attempts from before schema 4 have no untether mode"
        );
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
}
