//! Live pages without polling the lab: while at least one page listens on `/events`, one
//! task asks a kept-open store connection for its data version once a second (SQLite's
//! `PRAGMA data_version`; PostgreSQL's `LISTEN/NOTIFY` from the tables' triggers, as `lab
//! status --watch` does) and tells every listening page when it moved. With no page
//! listening the task is gone: `lab serve` then wakes for nothing. The runner does nothing
//! extra for it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;

use crate::store::Store;

/// How often the store is asked while someone watches.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Opens the watcher's own connection (its data version counts the others' commits).
pub type Opener = Arc<dyn Fn() -> Option<Store> + Send + Sync>;

pub struct Live {
    changed: broadcast::Sender<u64>,
    /// Whether the watching task runs; changed only under this lock, with the count of
    /// listeners looked at under it too, so a page that arrives as the task ends restarts it.
    running: Mutex<bool>,
    open: Opener,
}

impl Live {
    pub fn new(open: Opener) -> Arc<Live> {
        let (changed, _) = broadcast::channel(16);
        Arc::new(Live { changed, running: Mutex::new(false), open })
    }

    /// A page starts listening: the watcher starts if it was not running.
    pub fn listen(self: &Arc<Self>) -> broadcast::Receiver<u64> {
        let rx = self.changed.subscribe();
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if !*running {
            *running = true;
            tokio::spawn(Arc::clone(self).watch());
        }
        rx
    }

    /// Whether the watching task runs.
    #[cfg(test)]
    fn running(&self) -> bool {
        *self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn watch(self: Arc<Self>) {
        let open = Arc::clone(&self.open);
        let Ok(Some(store)) = tokio::task::spawn_blocking(move || open()).await else {
            *self.running.lock().unwrap_or_else(|p| p.into_inner()) = false;
            return;
        };
        let version = |s: &Store| s.data_version().ok();
        let mut seen = {
            let s = store.clone();
            tokio::task::spawn_blocking(move || version(&s)).await.ok().flatten()
        };
        let mut tick = tokio::time::interval(CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        tick.tick().await;
        loop {
            tick.tick().await;
            {
                let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
                if self.changed.receiver_count() == 0 {
                    *running = false;
                    return;
                }
            }
            let s = store.clone();
            let now = tokio::task::spawn_blocking(move || version(&s)).await.ok().flatten();
            if now.is_some() && now != seen {
                seen = now;
                let _ = self.changed.send(now.unwrap_or_default() as u64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The watcher starts with the first listener, reports another connection's write, and
    /// is gone a tick after the last listener left.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_watcher_runs_only_while_a_page_listens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab.db");
        drop(Store::open(&path).unwrap());
        let at = path.clone();
        let live = Live::new(Arc::new(move || Store::open_existing(&at).ok()));
        assert!(!live.running());
        let mut rx = live.listen();
        assert!(live.running());
        // Let the watcher read its first version, then write from another connection.
        tokio::time::sleep(CHECK_EVERY / 2).await;
        rusqlite::Connection::open(&path).unwrap().execute_batch("CREATE TABLE poke (x INTEGER)").unwrap();
        let v = tokio::time::timeout(CHECK_EVERY * 5, rx.recv()).await.expect("a change within 5 checks");
        assert!(v.is_ok());
        drop(rx);
        let deadline = tokio::time::Instant::now() + CHECK_EVERY * 5;
        while live.running() {
            assert!(tokio::time::Instant::now() < deadline, "the watcher outlived its listeners");
            tokio::time::sleep(CHECK_EVERY / 4).await;
        }
    }
}
