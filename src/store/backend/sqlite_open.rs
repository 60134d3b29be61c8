//! Opening a SQLite store's file: its connection's settings, and where its lock files are
//! (the schema is `store/schema.rs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

/// Where a SQLite store's lock files are: `<store file>.locks/`.
pub fn lock_dir(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".locks");
    PathBuf::from(name)
}

/// Log pages after which a commit checkpoints (`PRAGMA wal_autocheckpoint`).
pub const WAL_CHECKPOINT_PAGES: i64 = 8000;

/// Opens (creating the file if needed) a SQLite store's connection, set up as the store
/// needs it: WAL, durable across a crash, foreign keys, rare checkpoints.
pub fn open_sqlite(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // NORMAL in WAL mode is durable across process crashes (kill -9); only a
    // power loss can lose the last transactions.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // A checkpoint every 8 000 log pages (32 MB) instead of SQLite's 1 000. It runs
    // inside a commit, on the thread every device's attempt waits on, and ends with two
    // `fsync`s; rarer, it also copies a page rewritten by many commits once. On a
    // 10 000-trial simulated campaign on this project's VM's disk the transactions that
    // recorded attempts took 1.1-1.4 s instead of 1.7-2.1 s. (A thread checkpointing
    // beside the writer was tried: it copied the same pages again and again and cost
    // more CPU than it saved the writer.)
    conn.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)?;
    Ok(conn)
}
