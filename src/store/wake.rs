//! Wake-ups without polling (docs/agents.md): who changes what agents or `lab wait` must
//! see says so on a channel, and they sleep until it does. PostgreSQL: `NOTIFY` on the
//! channel, heard by a `LISTEN` session that sleeps on its socket. SQLite (agents on the
//! store's machine): a file per channel next to the store, touched to notify, watched
//! with inotify by a thread that sleeps in `read(2)`. Either way a sleeper wakes only
//! when told, never on a timer.

use std::path::{Path, PathBuf};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tokio::sync::mpsc;

use super::backend::{Db, Heard, lock_dir, pg_listen, vals};
use super::error::StoreError;
use super::location::Location;
use super::store::Store;

/// What a wake-up is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// Work for agents: a campaign submitted, cancelled or grown; an agent told to drain.
    Work,
    /// A campaign's events or status changed: for `lab wait`.
    Events,
}

impl Channel {
    pub(super) fn name(self) -> &'static str {
        match self {
            Channel::Work => "lab_work",
            Channel::Events => "lab_events",
        }
    }
}

/// What a sleeper is woken by.
pub type Wake = Heard;

/// A sleeper's wake-ups on one channel: `next` waits for the next one.
pub struct Wakes {
    rx: mpsc::UnboundedReceiver<Wake>,
}

impl Wakes {
    /// The next wake-up; `None` if its thread ended (it cannot listen any more).
    pub async fn next(&mut self) -> Option<Wake> {
        self.rx.recv().await
    }

    /// Every wake-up already there, without waiting: a burst is one look.
    pub fn drain(&mut self) {
        while self.rx.try_recv().is_ok() {}
    }
}

/// The file a SQLite store's channel is touched in.
fn wake_file(store: &Path, channel: Channel) -> PathBuf {
    lock_dir(store).join(format!("wake-{}", channel.name()))
}

impl Store {
    /// Tells the channel's sleepers (best effort: a sleeper that misses it looks again on
    /// its next wake-up).
    pub fn notify(&self, channel: Channel) -> Result<(), StoreError> {
        self.notify_about(channel, "")
    }

    /// [`Store::notify`] about `subject` (a campaign's id): on PostgreSQL a sleeper that
    /// follows another subject need not look. Empty: about anything.
    pub fn notify_about(&self, channel: Channel, subject: &str) -> Result<(), StoreError> {
        match (&self.db, self.location()) {
            (Db::Postgres(_), _) => {
                let c = vals![channel.name(), subject];
                self.db.call(move |conn| conn.execute("SELECT pg_notify(?1, ?2)", &c).map(drop))?;
            }
            (_, Location::Sqlite(path)) => {
                let file = wake_file(path, channel);
                let touch = || -> std::io::Result<()> {
                    std::fs::create_dir_all(file.parent().unwrap_or(Path::new(".")))?;
                    let f = std::fs::File::options().create(true).truncate(false).write(true).open(&file)?;
                    f.set_modified(std::time::SystemTime::now())
                };
                touch().map_err(|e| StoreError::Internal(format!("wake file {}: {e}", file.display())))?;
            }
            (_, Location::Postgres(_)) => {}
        }
        Ok(())
    }

    /// Starts listening on `channel`: from when this returns, every `notify` on it wakes
    /// the returned `Wakes`.
    pub fn listen(&self, channel: Channel) -> Result<Wakes, StoreError> {
        let (tx, rx) = mpsc::unbounded_channel();
        match (&self.db, self.location()) {
            (Db::Postgres(owner), _) => pg_listen(owner.url(), channel.name(), tx)?,
            (_, Location::Sqlite(path)) => watch_file(&wake_file(path, channel), tx)?,
            (_, Location::Postgres(_)) => {}
        }
        Ok(Wakes { rx })
    }
}

/// A thread that sends a wake-up each time `file` is touched, until the receiver is gone.
fn watch_file(file: &Path, tx: mpsc::UnboundedSender<Wake>) -> Result<(), StoreError> {
    let err = |e: String| StoreError::Internal(format!("watching {}: {e}", file.display()));
    std::fs::create_dir_all(file.parent().unwrap_or(Path::new("."))).map_err(|e| err(e.to_string()))?;
    std::fs::File::options().create(true).truncate(false).write(true).open(file).map_err(|e| err(e.to_string()))?;
    let inotify = Inotify::init(InitFlags::IN_CLOEXEC).map_err(|e| err(e.to_string()))?;
    inotify
        .add_watch(file, AddWatchFlags::IN_ATTRIB | AddWatchFlags::IN_CLOSE_WRITE)
        .map_err(|e| err(e.to_string()))?;
    std::thread::Builder::new()
        .name("lab-wake".into())
        .spawn(move || {
            // Sleeps in read(2) until the file is touched.
            while let Ok(events) = inotify.read_events() {
                // A file says nothing of what changed: every sleeper looks.
                if !events.is_empty() && tx.send(Heard::Notified(String::new())).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| err(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Channel, Heard, Store};

    /// Events appended "told" are there when `lab wait` wakes, and the wake-up says which
    /// campaign (on SQLite a touched file says nothing: anything). 501 events: two inserts,
    /// the second of which notifies.
    fn told_events_wake_a_listener_about_their_campaign(s: Store, payload: &str) {
        let mut wakes = s.listen(Channel::Events).unwrap();
        let events: Vec<String> = (0..501).map(|i| format!("{{\"n\":{i}}}")).collect();
        s.append_events_told("c-1", "t", &events).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let heard = rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), wakes.next()).await });
        assert_eq!(heard.expect("no wake-up").expect("the listener ended"), Heard::Notified(payload.into()));
        let seen = s.events_after("c-1", 0, 1000).unwrap();
        assert_eq!(seen.len(), 501);
        assert_eq!(seen.last().unwrap(), &(501, "{\"n\":500}".to_string()));
    }

    #[test]
    fn told_events_wake_a_listener_about_their_campaign_on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        told_events_wake_a_listener_about_their_campaign(Store::open(&dir.path().join("lab.db")).unwrap(), "");
    }

    #[test_needs::needs(postgres)]
    #[test]
    fn told_events_wake_a_listener_about_their_campaign_on_postgres() {
        let url = crate::store::PgUrl::parse(&crate::testing::postgres::fresh_database()).unwrap();
        told_events_wake_a_listener_about_their_campaign(Store::open_postgres(&url).unwrap(), "c-1");
    }
}
