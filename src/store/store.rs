//! `Store`: the database behind campaigns, on SQLite or PostgreSQL: how it is opened,
//! and how attempts are recorded (batched, on either backend). Its operations are in
//! the files of what they are about (`campaigns.rs`, `attempts.rs`, `devices.rs`, …).
//!
//! The operations are blocking; async callers go through `tokio::task::spawn_blocking`
//! (see `runner::campaign`), and the runner's attempts through one thread of their own
//! (`runner::recorder`). SQLite's WAL mode lets `lab status` read from another
//! terminal while `lab run` writes.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;

use super::backend::{self, Db, Locks};
use super::batch::{self, AttemptQueue, Turn};
use super::encoded_attempt::EncodedAttempt;
use super::error::StoreError;
use super::location::Location;
use super::records::AttemptRecord;
use super::schema;
use super::sqlite_record::insert_attempt;

#[derive(Clone)]
pub struct Store {
    /// SQLite's connection, for what only SQLite does (`None` on PostgreSQL).
    pub(super) conn: Option<Arc<Mutex<Connection>>>,
    /// The connection, for the operations written once for both backends.
    pub(super) db: Db,
    /// What leases are made of: lock files next to a SQLite store, advisory locks on PostgreSQL.
    pub(super) locks: Arc<dyn Locks>,
    /// On PostgreSQL, the connection of the leases and the devices' queues, made at their
    /// first use: a device handed from one campaign to the next must not wait behind the
    /// campaign's own writes on `db` (docs/benchmarks.md, `agents`). SQLite's is `db`.
    lease_db: Arc<std::sync::OnceLock<Db>>,
    /// The SQLite file, or the PostgreSQL URL as shown (without its password).
    location: Location,
    /// Attempts waiting to be committed together (`record_attempt`).
    pub(super) attempts: Arc<AttemptQueue>,
    /// Commits made by `record_attempt` and `set_device_statuses`: the runner's writes.
    pub(super) commits: Arc<AtomicU64>,
    /// Nanoseconds spent in the transactions that record attempts (the benchmark prints it).
    recording_ns: Arc<AtomicU64>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("location", &self.location).finish()
    }
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
        let mut conn = backend::open_sqlite(path).map_err(err)?;
        schema::migrate(&mut conn).map_err(err)?;
        let conn = Arc::new(Mutex::new(conn));
        Ok(Store {
            db: Db::Sqlite(conn.clone()),
            conn: Some(conn),
            locks: Arc::new(backend::FileLocks { dir: backend::lock_dir(path) }),
            lease_db: Arc::default(),
            location: Location::Sqlite(path.to_path_buf()),
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
        owner.call(backend::migrate_postgres)?;
        Ok(Store {
            db: Db::Postgres(Arc::new(owner)),
            conn: None,
            locks: backend::PgLocks::shared(url)?,
            lease_db: Arc::default(),
            location: Location::Postgres(url.shown().to_string()),
            attempts: Arc::default(),
            commits: Arc::default(),
            recording_ns: Arc::default(),
        })
    }

    /// Where the store is: the SQLite file, or the PostgreSQL URL as shown (without its
    /// password).
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The connection leases and queues use: on PostgreSQL a second one, connected at the
    /// first call (if that fails, the store's own) and shared by the stores open on the
    /// database in this process at once (an agent's campaign parts: short statements, where
    /// a session each cost a server process and a SCRAM exchange as eighty parts started);
    /// on SQLite the store's own.
    pub(super) fn lease_db(&self) -> Db {
        match &self.db {
            Db::Sqlite(_) => self.db.clone(),
            Db::Postgres(owner) => self
                .lease_db
                .get_or_init(|| match super::PgOwner::shared_reconnecting(owner.url()) {
                    Ok(o) => Db::Postgres(o),
                    Err(_) => self.db.clone(),
                })
                .clone(),
        }
    }

    /// Which backend this store is on.
    pub fn dialect(&self) -> super::Dialect {
        match self.db {
            super::backend::Db::Sqlite(_) => super::Dialect::Sqlite,
            Db::Postgres(_) => super::Dialect::Postgres,
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
            None => Err(StoreError::SqliteOnly {
                at: std::panic::Location::caller(),
                store: Box::new(self.location.clone()),
            }),
        }
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
}

#[cfg(test)]
#[path = "store_tests.rs"]
pub(crate) mod tests;
