//! A PostgreSQL connection owned by a thread of its own: the store's operations are sync
//! (they run on blocking threads), and the `postgres` crate runs its own small runtime,
//! which must not be started from inside tokio's. Each call sends a closure to the
//! owner and waits for its answer; the connection ends when the handle is dropped, and
//! with it every session-level lock it held.

use std::sync::Mutex;
use std::sync::mpsc;

use super::conn::{Conn, DbError};
use super::pg_url::PgUrl;
use super::postgres_conn::PgClient;

type Job = Box<dyn FnOnce(&mut PgClient) + Send>;

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

impl PgOwner {
    /// Connects (without TLS where the URL does not ask for it) on a new thread.
    pub fn connect(url: &PgUrl) -> Result<PgOwner, DbError> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready) = mpsc::sync_channel(1);
        let config = url.config.clone();
        let shown = url.shown().to_string();
        let thread = std::thread::Builder::new()
            .name("postgres".into())
            .spawn(move || {
                let client = match config.connect(postgres::NoTls) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(DbError::from(e)));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let mut client = PgClient::new(client);
                for job in rx {
                    job(&mut client);
                }
            })
            .map_err(|e| DbError::Closed(format!("cannot start the thread of {shown}: {e}")))?;
        match ready.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(connect_error(url, e)),
            Err(_) => return Err(DbError::Closed(format!("the connection to {} ended at its start", url.shown()))),
        }
        Ok(PgOwner { jobs: Mutex::new(Some(jobs)), thread: Mutex::new(Some(thread)), url: url.clone() })
    }

    /// Runs `f` on the connection and waits for it.
    pub fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Conn) -> Result<T, DbError> + Send + 'static,
    ) -> Result<T, DbError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |c: &mut PgClient| {
            let _ = tx.send(f(c));
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

/// A connection refused, said with the URL as shown (never its password).
fn connect_error(url: &PgUrl, e: DbError) -> DbError {
    let fix = if url.has_password() || std::env::var_os("PGPASSWORD").is_some() {
        "check the server, the user and its password"
    } else {
        "check the server; a password goes in the URL or PGPASSWORD"
    };
    DbError::Postgres(format!(
        "connecting to {}: {}; fix: {fix}",
        url.shown(),
        e.to_string().trim_start_matches("PostgreSQL: ")
    ))
}
