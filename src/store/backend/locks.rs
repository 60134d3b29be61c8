//! The locks leases are made of (`store/lease.rs`, `store/queue.rs`): each device's, and
//! each waiter's own. Held through something that dies with the holder, so a holder that
//! dies frees its lock at once, without a timeout: an open file's `flock` next to a SQLite
//! store (the kernel drops it with the process), a session-level advisory lock on
//! PostgreSQL (the server drops it with the session, which ends with the process or its
//! connection).

/// Why a lock could not be taken (or waited for).
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("lock file {}: {source}", path.display())]
    File { path: std::path::PathBuf, source: std::io::Error },
    /// The lock's key, or its session, from PostgreSQL.
    #[error("{0}")]
    Db(#[from] super::conn::DbError),
    /// A waiter's token that is not two numbers.
    #[error("bad token")]
    BadToken,
    #[error("a runtime for a lock's session: {0}")]
    Runtime(std::io::Error),
    #[error("cannot start a lock's thread: {0}")]
    Thread(std::io::Error),
    #[error("a lock's thread ended without an answer")]
    NoAnswer,
    /// A waiter's own lock, taken back from under it: it left the queue.
    #[error("cancelled")]
    Cancelled,
}

/// What a lock is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockName {
    /// A device's lease.
    Device(String),
    /// A waiter's place in a device's queue, by its token.
    Waiter { device: String, token: String },
    /// A lab host's agent (`lab agent`): held while it serves the host.
    Agent(String),
}

/// The process that holds a row's lock, as the row names it.
#[derive(Debug, Clone)]
pub struct Owner {
    pub pid: u32,
    pub start: Option<u64>,
    pub lock: LockName,
}

/// A held lock: released when dropped.
pub trait Held: Send + Sync + std::fmt::Debug {
    /// Turns `true` if the lock is lost while its holder lives: on PostgreSQL, when the
    /// session that holds it ends (the server restarted, a network cut outlasted the
    /// keepalives); from then on another holder may have it. `None` where it cannot be lost
    /// (an `flock` lives as long as its process).
    fn lost(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        None
    }
}

pub trait Locks: Send + Sync + std::fmt::Debug {
    /// Takes the lock: waits for it when `wait` (the calling thread sleeps until it is
    /// free), else `None` when someone holds it. A waiter's lock that no longer exists is
    /// free.
    fn lock(&self, name: &LockName, wait: bool) -> Result<Option<Box<dyn Held>>, LockError>;
    /// Whether the row's owner still holds what it holds (it is alive).
    fn alive(&self, owner: &Owner) -> bool;
    /// [`Locks::alive`] of each owner, asked at once (on PostgreSQL one statement rather
    /// than one each).
    fn alive_all(&self, owners: &[Owner]) -> Vec<bool> {
        owners.iter().map(|o| self.alive(o)).collect()
    }
    /// A waiter's lock is gone for good: its file, where there is one.
    fn forget(&self, name: &LockName);
}

/// `items` split by whether their owners are alive, asked of `locks` at once: (alive,
/// dead), each in the order given.
pub fn split_alive<T>(locks: &dyn Locks, items: Vec<T>, owner: impl Fn(&T) -> Owner) -> (Vec<T>, Vec<T>) {
    let alive = locks.alive_all(&items.iter().map(owner).collect::<Vec<_>>());
    let (live, dead): (Vec<_>, Vec<_>) = items.into_iter().zip(alive).partition(|(_, a)| *a);
    (live.into_iter().map(|(t, _)| t).collect(), dead.into_iter().map(|(t, _)| t).collect())
}

/// A new waiter's token: two random 31-bit numbers (a file name, and PostgreSQL's two-key
/// advisory lock). A token already held by someone makes `enqueue` draw again.
pub fn new_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    // std's RandomState is seeded from the OS for each process: a random 64-bit number.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let r = h.finish();
    format!("{}-{}", (r >> 33) & 0x7fff_ffff, r & 0x7fff_ffff)
}
