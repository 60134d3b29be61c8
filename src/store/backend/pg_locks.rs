//! [`Locks`] on a PostgreSQL store: session-level advisory locks, each held by a
//! connection of its own, which the server drops with the session (the holder's process
//! dying closes it). A device's lock is `pg_advisory_lock(key)`, its key from
//! `device_keys` (one number per device name, no collisions); a waiter's is the two-key
//! `pg_advisory_lock(a, b)` of its token. Whether a row's owner is alive is whether the
//! server shows its lock granted (`pg_locks`), whichever machine it runs on.
//!
//! A session is the async client on a thread of its own, which sleeps on the connection
//! once the lock is held: it wakes only when the session ends, and then tells the holder
//! its lock is lost ([`Held::lost`]), without anyone asking the server in the meantime.

use super::conn::DbError;
use super::locks::{Held, LockError, LockName, Locks, Owner};
use super::pg_owner::PgOwner;
use super::pg_tls::connect_watched;
use super::postgres_conn::placeholders;
use super::value::vals;
use crate::config::PgUrl;

#[derive(Debug)]
pub struct PgLocks {
    url: PgUrl,
    /// For keys and `pg_locks`.
    admin: PgOwner,
}

/// A held lock's session: its thread ends it when this is dropped.
#[derive(Debug)]
struct Session {
    release: Option<tokio::sync::oneshot::Sender<()>>,
    lost: tokio::sync::watch::Receiver<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Held for Session {
    fn lost(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        Some(self.lost.clone())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            let _ = release.send(());
        }
        // The session is closed when this returns: the next holder may take the lock.
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The lock's session's settings: the server's timeouts must not end it or its wait (a
/// role's `statement_timeout` would cut a wait short; `idle_session_timeout`, from
/// PostgreSQL 14, would free a held lock while its holder still works). Only the settings
/// this server has are set.
const NO_TIMEOUTS: &str = "SELECT set_config(name, '0', false) FROM pg_settings WHERE name IN
    ('statement_timeout', 'lock_timeout', 'idle_session_timeout', 'idle_in_transaction_session_timeout')";

impl PgLocks {
    pub fn new(url: &PgUrl) -> Result<PgLocks, DbError> {
        Ok(PgLocks { url: url.clone(), admin: PgOwner::connect_reconnecting(&url.named("lab-admin"))? })
    }

    /// The advisory-lock call's arguments, and what `pg_locks` shows for it.
    fn key(&self, name: &LockName) -> Result<(&'static str, Vec<i64>, [i64; 3]), LockError> {
        match name {
            LockName::Device(d) => self.named_key(d.clone(), 1),
            // An agent's key is a `device_keys` row too, under a name no device has
            // (config names have no spaces): a number of its own.
            LockName::Agent(h) => self.named_key(format!("agent {h}"), 1),
            LockName::Waiter { token, .. } => {
                let (a, b) = token.split_once('-').ok_or(LockError::BadToken)?;
                let number = |n: &str| n.parse::<i64>().map_err(|_| LockError::BadToken);
                let (a, b) = (number(a)?, number(b)?);
                // The two-key form takes INTEGERs; the keys are sent as BIGINTs.
                Ok(("CAST(CAST(?1 AS BIGINT) AS INTEGER), CAST(CAST(?2 AS BIGINT) AS INTEGER)", vec![a, b], [a, b, 2]))
            }
        }
    }
}

impl PgLocks {
    /// The one-key lock of `name` (its number from `device_keys`); `sub`: `pg_locks`'
    /// `objsubid` for it (1: the one-key form).
    fn named_key(&self, name: String, sub: i64) -> Result<(&'static str, Vec<i64>, [i64; 3]), LockError> {
        let key = self.admin.call(move |c| {
            c.execute("INSERT INTO device_keys (device) VALUES (?1) ON CONFLICT (device) DO NOTHING", &vals![&name])?;
            c.query("SELECT key FROM device_keys WHERE device = ?1", &vals![&name])?[0].read::<i64>()
        })?;
        Ok(("?1", vec![key], [key >> 32, key & 0xffff_ffff, sub]))
    }
}

impl Locks for PgLocks {
    fn lock(&self, name: &LockName, wait: bool) -> Result<Option<Box<dyn Held>>, LockError> {
        let (args, keys, _) = self.key(name)?;
        let sql = placeholders(&if wait {
            format!("SELECT true FROM (SELECT pg_advisory_lock({args})) AS held")
        } else {
            format!("SELECT pg_try_advisory_lock({args})")
        });
        let url = self.url.with_keepalives().named("lab-lock");
        let (got_tx, got) = std::sync::mpsc::channel::<Result<bool, LockError>>();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let (lost_tx, lost) = tokio::sync::watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("lab-lock".into())
            .spawn(move || {
                let no_runtime = got_tx.clone();
                let ran = super::pg_tls::on_own_runtime(async move {
                    let taken = async {
                        let (client, ended) = connect_watched(&url).await?;
                        client.batch_execute(NO_TIMEOUTS).await.map_err(DbError::from)?;
                        let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                            keys.iter().map(|k| k as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
                        // Waiting for the lock is one statement that returns once it is held.
                        let got: bool = client.query_one(&sql, &refs).await.map_err(DbError::from)?.get(0);
                        Ok::<_, DbError>((client, ended, got))
                    };
                    match taken.await {
                        Err(e) => drop(got_tx.send(Err(LockError::Db(e)))),
                        Ok((client, ended, got)) => {
                            let _ = got_tx.send(Ok(got));
                            if got {
                                tokio::select! {
                                    _ = ended => drop(lost_tx.send(true)),
                                    _ = released => {}
                                }
                            }
                            drop(client);
                        }
                    }
                });
                if let Err(e) = ran {
                    let _ = no_runtime.send(Err(LockError::Runtime(e)));
                }
            })
            .map_err(LockError::Thread)?;
        match got.recv() {
            Ok(Ok(true)) => Ok(Some(Box::new(Session { release: Some(release), lost, thread: Some(thread) }))),
            Ok(Ok(false)) => {
                let _ = thread.join();
                Ok(None)
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(LockError::NoAnswer),
        }
    }

    /// An owner whose lock cannot be looked up (a connection lost) counts as alive: its row
    /// is never removed on a doubt.
    fn alive(&self, owner: &Owner) -> bool {
        let Ok((_, _, [class, obj, sub])) = self.key(&owner.lock) else { return true };
        self.admin
            .call(move |c| {
                let rows = c.query(
                    "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
                       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                       AND classid::bigint = ?1 AND objid::bigint = ?2 AND objsubid = ?3",
                    &vals![class, obj, sub],
                )?;
                Ok(!rows.is_empty())
            })
            .unwrap_or(true)
    }

    fn forget(&self, _name: &LockName) {}
}
