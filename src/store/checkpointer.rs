//! `Checkpointer`: copies the store's write-ahead log back into the database, mostly on a
//! thread of its own, off the connection that commits.
//!
//! SQLite's default does it inside the commit that takes the log past 1 000 pages, on the
//! committing thread, and a checkpoint ends with an `fsync` of the log and one of the
//! database. During a campaign that thread is the one every device's attempt waits on
//! (`runner::recorder`), and on a disk with slow `fsync`s every device stopped meanwhile.
//!
//! Here a commit that leaves `BACKGROUND_PAGES` or more in the log nudges a thread, which
//! checkpoints on its own connection in SQLite's PASSIVE mode: it copies what is in the log
//! and syncs the database without ever waiting for the writer, which goes on appending.
//! The log can only start over from its beginning once a checkpoint has copied all of it
//! and the next commit has not begun, which a thread running beside a busy writer rarely
//! sees; so a commit that leaves `INLINE_PAGES` or more still checkpoints itself, as
//! SQLite would, with little left to copy or sync. Nothing runs while nothing is
//! committed: the thread is started by the first nudge, sleeps on its channel, and ends
//! when the store's connection is closed.
//!
//! A checkpoint is what SQLite does anyway; what it copies is durable in the log before
//! (WAL with `synchronous = NORMAL`), so a crash at any point loses nothing committed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use rusqlite::Connection;
use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;

/// Log pages after which the thread is asked to checkpoint: SQLite's own default mark.
pub const BACKGROUND_PAGES: i32 = 1000;

/// Log pages after which the commit checkpoints itself (32 MB of 4 KB pages): a log the
/// thread never caught up with still starts over.
pub const INLINE_PAGES: i32 = 8000;

/// The committing connection's side of the checkpointing thread.
pub struct Checkpointer {
    path: PathBuf,
    /// The thread's channel, once started (`None`: it could not be; commits checkpoint).
    thread: OnceLock<Option<SyncSender<()>>>,
}

impl Checkpointer {
    pub fn new(path: &Path) -> Checkpointer {
        Checkpointer { path: path.to_path_buf(), thread: OnceLock::new() }
    }

    /// Installs the hook on `conn`, the store's committing connection. It replaces
    /// `PRAGMA wal_autocheckpoint` (SQLite keeps one hook a connection).
    pub fn install(self, conn: &mut Connection) -> rusqlite::Result<()> {
        conn.wal_hook(Some(move |wal: &mut Wal, pages: i32| self.committed(wal, pages)))
    }

    /// After each commit, with the pages now in the log.
    fn committed(&self, wal: &mut Wal, pages: i32) -> rusqlite::Result<()> {
        if pages >= INLINE_PAGES || (pages >= BACKGROUND_PAGES && !self.nudge()) {
            // PASSIVE, as SQLite's own: `SQLITE_BUSY` (the thread's checkpoint running)
            // just means the next commit tries again.
            match wal.checkpoint_v2(CheckpointMode::PASSIVE) {
                Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::DatabaseBusy => {}
                other => {
                    other?;
                }
            }
        }
        Ok(())
    }

    /// Asks the thread for a checkpoint, starting it the first time; false when there is
    /// no thread to ask.
    fn nudge(&self) -> bool {
        let thread = self.thread.get_or_init(|| start(&self.path).ok());
        // One nudge waiting is enough: a checkpoint takes every page there is by then.
        thread.as_ref().is_some_and(|tx| !matches!(tx.try_send(()), Err(TrySendError::Disconnected(()))))
    }
}

/// The thread, with its own connection to the database at `path`.
fn start(path: &Path) -> std::io::Result<SyncSender<()>> {
    let conn = Connection::open(path).map_err(std::io::Error::other)?;
    // A connection learns the database is in WAL mode when it first reads it; until then
    // a checkpoint does nothing.
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).map_err(std::io::Error::other)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(std::io::Error::other(format!("journal mode {mode}, not WAL")));
    }
    let (tx, rx) = sync_channel(1);
    std::thread::Builder::new().name("lab-checkpoint".into()).spawn(move || run(&conn, &rx))?;
    Ok(tx)
}

fn run(conn: &Connection, nudged: &Receiver<()>) {
    while nudged.recv().is_ok() {
        // Busy (another checkpoint running) or failed: the writer's own checkpoint at
        // `INLINE_PAGES` still keeps the log bounded.
        let _ = conn.wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(conn: &Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap()
    }

    /// A database in WAL mode with the checkpointer, and the size of its log.
    fn open(dir: &Path, checkpointer: Checkpointer) -> (Connection, PathBuf) {
        let path = dir.join("x.db");
        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
        conn.execute_batch("CREATE TABLE t (v BLOB)").unwrap();
        checkpointer.install(&mut conn).unwrap();
        (conn, dir.join("x.db-wal"))
    }

    #[test]
    fn the_thread_copies_the_log_into_the_database_while_commits_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let (conn, _) = open(dir.path(), Checkpointer::new(&db));
        // About three log pages a commit (the row's, the tree's root, the header's): 1 500
        // commits pass the thread's mark and stay below the commits' own.
        for _ in 0..1500 {
            conn.execute("INSERT INTO t VALUES (zeroblob(3000))", []).unwrap();
        }
        // Only a checkpoint writes the database file; the commits stayed in the log. The
        // thread runs beside this one: wait for it (bounded), then see what it copied.
        let copied = |min: u64| std::fs::metadata(&db).map(|m| m.len() >= min).unwrap_or(false);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !copied(1000 * 4096) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(copied(1000 * 4096), "the database file is {} bytes", std::fs::metadata(&db).unwrap().len());
        assert_eq!(rows(&conn), 1500);
    }

    #[test]
    fn a_busy_writer_still_keeps_its_log_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, wal) = open(dir.path(), Checkpointer::new(&dir.path().join("x.db")));
        let mut largest = 0;
        // 20 000 commits are some 60 000 log pages, were it never started over.
        for _ in 0..20_000 {
            conn.execute("INSERT INTO t VALUES (zeroblob(3000))", []).unwrap();
            largest = largest.max(std::fs::metadata(&wal).unwrap().len());
        }
        let bound = 2 * INLINE_PAGES as u64 * 4200;
        assert!(largest < bound, "the log grew to {largest} bytes (bound {bound})");
        drop(conn);
        assert_eq!(rows(&Connection::open(dir.path().join("x.db")).unwrap()), 20_000, "every commit is there");
    }

    #[test]
    fn without_a_thread_the_commits_checkpoint_at_the_first_mark() {
        let dir = tempfile::tempdir().unwrap();
        // A path where no connection opens: the thread cannot start.
        let nowhere = dir.path().join("no/such/folder/x.db");
        let (conn, wal) = open(dir.path(), Checkpointer::new(&nowhere));
        let mut largest = 0;
        for _ in 0..5000 {
            conn.execute("INSERT INTO t VALUES (zeroblob(3000))", []).unwrap();
            largest = largest.max(std::fs::metadata(&wal).unwrap().len());
        }
        let bound = 2 * BACKGROUND_PAGES as u64 * 4200;
        assert!(largest < bound, "the log grew to {largest} bytes (bound {bound})");
        assert_eq!(rows(&conn), 5000);
    }
}
