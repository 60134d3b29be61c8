//! Live pages without polling the lab. While at least one page listens on `/events`, one
//! thread asks a kept-open store connection for its data version once a second (SQLite's
//! `PRAGMA data_version`; PostgreSQL's `LISTEN/NOTIFY` from the tables' triggers, as `lab
//! status --watch` does). When it moved, the thread renders each page that someone watches
//! once, and sends the new content to every page watching it: the pages swap it in, and ask
//! the server for nothing. With no page listening the thread is gone: `lab serve` then
//! wakes for nothing. The runner does nothing extra for it.
//!
//! A thread of its own, sleeping in the kernel between checks, rather than a tokio timer:
//! tokio's timer wheel wakes a one-second timer twice (once at its coarse slot, once at its
//! deadline), and the store's calls block. The event loop wakes only when there is
//! something to write to the pages (benches/serve.rs measures both).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::broadcast;

use crate::store::Store;

/// How often the store is asked while someone watches.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Every this many checks, a keep-alive comment goes to every page in the same wake: a
/// page gone without closing its connection is noticed, and its listener ends.
const PING_EVERY: u32 = 15;

/// Opens the watcher's own connection (its data version counts the others' commits).
pub type Opener = Arc<dyn Fn() -> Option<Store> + Send + Sync>;

/// Renders the live parts of pages (by path) from a store: each path with its content,
/// leaving out a path that has none.
pub type Render = dyn Fn(&Store, &[String]) -> Vec<(String, String)> + Send + Sync;
pub type Renderer = Arc<Render>;

/// What the watcher sends to the pages, once a check at most: one message, so the event
/// loop wakes once to write to every page.
#[derive(Debug, Clone, PartialEq)]
pub struct Msg {
    /// New live parts: each page path with its content.
    pub pages: Arc<Vec<(String, Arc<str>)>>,
    /// A keep-alive for the pages that get no content.
    pub ping: bool,
}

/// What one page is sent of a [`Msg`].
#[derive(Debug, PartialEq)]
pub enum ForPage<'a> {
    Content(&'a str),
    KeepAlive,
}

impl Msg {
    /// What page `path` is sent: its content, else a keep-alive, else nothing.
    pub fn for_page(&self, path: &str) -> Option<ForPage<'_>> {
        match self.pages.iter().find(|(p, _)| p == path) {
            Some((_, html)) => Some(ForPage::Content(html)),
            None => self.ping.then_some(ForPage::KeepAlive),
        }
    }
}

#[derive(Default)]
struct Watching {
    /// Whether the watching thread runs.
    running: bool,
    /// Listeners per page path.
    pages: BTreeMap<String, usize>,
    /// Pages that get their content at the next check whatever it is: a page that just
    /// began listening (the store may have moved since it loaded) or missed messages.
    fresh: BTreeSet<String>,
}

pub struct Live {
    tx: broadcast::Sender<Msg>,
    /// Changed only under this lock, with the listeners counted under it too, so a page
    /// that arrives as the task ends restarts it.
    watching: Mutex<Watching>,
    open: Opener,
    render: Renderer,
}

/// A page listening; it stops being counted when dropped.
pub struct Listener {
    live: Arc<Live>,
    pub path: String,
    pub rx: broadcast::Receiver<Msg>,
}

impl Listener {
    /// This page missed messages: it gets its whole content at the next check.
    pub fn refresh(&self) {
        self.live.lock().fresh.insert(self.path.clone());
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let mut w = self.live.lock();
        if let Some(n) = w.pages.get_mut(&self.path) {
            *n -= 1;
            if *n == 0 {
                w.pages.remove(&self.path);
            }
        }
    }
}

impl Live {
    pub fn new(open: Opener, render: Renderer) -> Arc<Live> {
        let (tx, _) = broadcast::channel(64);
        Arc::new(Live { tx, watching: Mutex::new(Watching::default()), open, render })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watching> {
        self.watching.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Page `path` starts listening: the watcher starts if it was not running.
    pub fn listen(self: &Arc<Self>, path: &str) -> Listener {
        let rx = self.tx.subscribe();
        let mut w = self.lock();
        *w.pages.entry(path.to_string()).or_default() += 1;
        w.fresh.insert(path.to_string());
        if !w.running {
            let live = Arc::clone(self);
            let started = std::thread::Builder::new().name("lab serve watcher".into()).spawn(move || live.watch());
            // Without the thread the pages still load; they are not updated.
            w.running = started.is_ok();
        }
        Listener { live: Arc::clone(self), path: path.to_string(), rx }
    }

    /// Whether the watching task runs.
    #[cfg(test)]
    fn running(&self) -> bool {
        self.lock().running
    }

    /// The watcher's thread: a check a second while anyone listens.
    fn watch(self: Arc<Self>) {
        let Some(store) = (self.open)() else {
            self.lock().running = false;
            return;
        };
        let mut seen = store.data_version().ok();
        let mut sent: BTreeMap<String, Arc<str>> = BTreeMap::new();
        let mut next = Instant::now() + CHECK_EVERY;
        let mut ticks = 0u32;
        loop {
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            // A late check (a slow render) does not bring the next one closer.
            next = (next + CHECK_EVERY).max(Instant::now() + CHECK_EVERY / 2);
            ticks += 1;
            // Every keep-alive, every page is drawn again even if the store did not move:
            // what a page shows also depends on processes alive and on the clock.
            let ping = ticks.is_multiple_of(PING_EVERY);
            let (pages, fresh): (Vec<String>, BTreeSet<String>) = {
                let mut w = self.lock();
                if w.pages.is_empty() {
                    w.running = false;
                    return;
                }
                let fresh = std::mem::take(&mut w.fresh);
                (w.pages.keys().cloned().collect(), fresh)
            };
            sent.retain(|p, _| pages.contains(p));
            let now = store.data_version().ok();
            let moved = now.is_some() && now != seen;
            if moved {
                seen = now;
            }
            let due: Vec<String> = pages.iter().filter(|p| moved || ping || fresh.contains(*p)).cloned().collect();
            // A render that panics (a report's bug) costs this check, not the watcher.
            let rendered = if due.is_empty() {
                Vec::new()
            } else {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.render)(&store, &due)))
                    .unwrap_or_default()
            };
            let mut changed = Vec::new();
            for (path, html) in rendered {
                if !fresh.contains(&path) && sent.get(&path).is_some_and(|last| **last == *html) {
                    continue;
                }
                let html: Arc<str> = html.into();
                sent.insert(path.clone(), Arc::clone(&html));
                changed.push((path, html));
            }
            if !changed.is_empty() || ping {
                let _ = self.tx.send(Msg { pages: Arc::new(changed), ping });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The watcher starts with the first listener, sends each watched page's new content
    /// once after another connection's write (and nothing for a page nobody watches), and
    /// is gone a tick after the last listener left.
    #[tokio::test(flavor = "current_thread")]
    async fn the_watcher_renders_what_is_watched_only_while_a_page_listens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab.db");
        drop(Store::open(&path).unwrap());
        let at = path.clone();
        let render: Renderer = Arc::new(|s: &Store, pages: &[String]| {
            let v = s.data_version().unwrap_or_default();
            pages.iter().map(|p| (p.clone(), format!("{p} at version {v}"))).collect()
        });
        let live = Live::new(Arc::new(move || Store::open_existing(&at).ok()), render);
        assert!(!live.running());
        let mut a = live.listen("/");
        let b = live.listen("/");
        assert!(live.running());
        // Let the watcher read its first version, then write from another connection.
        tokio::time::sleep(CHECK_EVERY / 2).await;
        rusqlite::Connection::open(&path).unwrap().execute_batch("CREATE TABLE poke (x INTEGER)").unwrap();
        let got = tokio::time::timeout(CHECK_EVERY * 5, a.rx.recv()).await.expect("a change within 5 checks");
        let msg = got.unwrap();
        assert_eq!(msg.pages.len(), 1, "{msg:?}");
        match msg.for_page("/") {
            Some(ForPage::Content(html)) => assert!(html.starts_with("/ at version "), "{html}"),
            other => panic!("the page's content, not {other:?}"),
        }
        assert!(a.rx.try_recv().is_err(), "one message, however many pages watch it");
        // Nothing moved since: nothing more is sent (the keep-alive comes every 15 checks).
        tokio::time::sleep(CHECK_EVERY * 2 + CHECK_EVERY / 2).await;
        assert!(a.rx.try_recv().is_err(), "the same content is not sent again");
        drop((a, b));
        let deadline = tokio::time::Instant::now() + CHECK_EVERY * 5;
        while live.running() {
            assert!(tokio::time::Instant::now() < deadline, "the watcher outlived its listeners");
            tokio::time::sleep(CHECK_EVERY / 4).await;
        }
    }
}
