//! A PostgreSQL connection owned by a thread of its own: the store's operations are sync
//! (they run on blocking threads), and the `postgres` crate runs its own small runtime,
//! which must not be started from inside tokio's. Each call sends a closure to the
//! owner and waits for its answer; the connection ends when the handle is dropped, and
//! with it every session-level lock it held.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::conn::{Conn, DbError};
use super::postgres_conn::PgClient;
use crate::config::PgUrl;

/// A call, and what connects again when the session was lost (`false`: it stays lost).
type Job = Box<dyn FnOnce(&mut PgClient, &mut dyn FnMut(&mut PgClient) -> bool) + Send>;

/// The handle of a connection's owner thread.
pub struct PgOwner {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    url: PgUrl,
}

impl std::fmt::Debug for PgOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgOwner({})", self.url.shown())
    }
}

/// How long a reconnecting owner keeps trying before a call fails, and its longest pause.
const RECONNECT_FOR: Duration = Duration::from_secs(120);
const RECONNECT_PAUSE_MAX: Duration = Duration::from_secs(10);

impl PgOwner {
    /// Connects (with TLS as the URL's `sslmode` says: `pg_tls.rs`) on a new thread. A lost
    /// connection stays lost: what it held (a session's locks) is gone with it.
    pub fn connect(url: &PgUrl) -> Result<PgOwner, DbError> {
        Self::start(url, false)
    }

    /// [`PgOwner::connect`], and a call that finds the connection lost first connects
    /// again, with backoff (0.25 s doubling to 10 s, for up to 2 minutes): for connections
    /// that hold nothing across calls (the store's queries and writes).
    pub fn connect_reconnecting(url: &PgUrl) -> Result<PgOwner, DbError> {
        Self::start(url, true)
    }

    /// [`PgOwner::connect_reconnecting`], one for every caller in this process while any
    /// has it (by the URL's settings, its application name included).
    pub fn shared_reconnecting(url: &PgUrl) -> Result<Arc<PgOwner>, DbError> {
        static SHARED: super::per_url::PerUrl<PgOwner> = super::per_url::PerUrl::new();
        SHARED.get(url, || Self::connect_reconnecting(url))
    }

    fn start(url: &PgUrl, reconnect: bool) -> Result<PgOwner, DbError> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready) = mpsc::sync_channel(1);
        let tls_url = url.clone();
        let shown = url.shown().to_string();
        let thread = std::thread::Builder::new()
            .name("lab-store".into())
            .spawn(move || {
                let client = match super::pg_tls::connect(&tls_url) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let mut client = PgClient::new(client);
                let mut again = |client: &mut PgClient| {
                    let fresh = if reconnect { connect_again(&tls_url) } else { None };
                    fresh.map(|c| *client = PgClient::new(c)).is_some()
                };
                for job in rx {
                    if client.client.is_closed() {
                        again(&mut client);
                    }
                    job(&mut client, &mut again);
                }
            })
            .map_err(|e| DbError::Closed(format!("cannot start the thread of {shown}: {e}")))?;
        match ready.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(super::pg_tls::connect_error(url, e)),
            Err(_) => return Err(DbError::Closed(format!("the connection to {} ended at its start", url.shown()))),
        }
        Ok(PgOwner { jobs: Mutex::new(Some(jobs)), thread: Mutex::new(Some(thread)), url: url.clone() })
    }

    /// Runs `f` on the connection and waits for it. On a reconnecting owner, `f` runs once
    /// more on a new connection when the server ended the session it ran on.
    pub fn call<T: Send + 'static>(
        &self,
        mut f: impl FnMut(&mut dyn Conn) -> Result<T, DbError> + Send + 'static,
    ) -> Result<T, DbError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |c: &mut PgClient, again: &mut dyn FnMut(&mut PgClient) -> bool| {
            // Begun by an earlier call: the transaction is gone with the session, and
            // running `f` on a new connection would run it outside one.
            let begun_before = c.in_transaction;
            let mut out = f(c);
            if matches!(out, Err(DbError::Closed(_))) && !begun_before && again(c) {
                out = f(c);
            }
            let _ = tx.send(out);
        });
        let sent = self.jobs.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|j| j.send(job).is_ok());
        if sent != Some(true) {
            return Err(DbError::Closed(self.url.shown().to_string()));
        }
        rx.recv().map_err(|_| DbError::Closed(self.url.shown().to_string()))?
    }

    pub fn url(&self) -> &PgUrl {
        &self.url
    }
}

impl Drop for PgOwner {
    fn drop(&mut self) {
        // The owner's loop ends with its channel, and the connection with it.
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

/// A new connection for one that was lost, tried with backoff for [`RECONNECT_FOR`];
/// `None`: the server is still away (the call then fails on the closed one).
fn connect_again(url: &PgUrl) -> Option<postgres::Client> {
    let until = std::time::Instant::now() + RECONNECT_FOR;
    let mut pause = Duration::from_millis(250);
    loop {
        if let Ok(c) = super::pg_tls::connect(url) {
            return Some(c);
        }
        if std::time::Instant::now() + pause > until {
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(RECONNECT_PAUSE_MAX);
    }
}
