//! [`Locks`] on a PostgreSQL store: session-level advisory locks, each held by a
//! connection of its own, which the server drops with the session (the holder's process
//! dying closes it). A device's lock is `pg_advisory_lock(key)`, its key from
//! `device_keys` (one number per device name, no collisions); a waiter's is the two-key
//! `pg_advisory_lock(a, b)` of its token. Whether a row's owner is alive is whether the
//! server shows its lock granted (`pg_locks`), whichever machine it runs on.

use super::conn::DbError;
use super::locks::{Held, LockName, Locks, Owner};
use super::pg_owner::PgOwner;
use super::value::Value;
use super::value::vals;
use crate::config::PgUrl;

#[derive(Debug)]
pub struct PgLocks {
    url: PgUrl,
    /// For keys and `pg_locks`.
    admin: PgOwner,
}

#[derive(Debug)]
struct Session(#[expect(dead_code, reason = "held for its session: closing it releases the lock")] PgOwner);

impl Held for Session {}

impl PgLocks {
    pub fn new(url: &PgUrl) -> Result<PgLocks, DbError> {
        Ok(PgLocks { url: url.clone(), admin: PgOwner::connect_reconnecting(&url.named("lab-admin"))? })
    }

    /// The advisory-lock call's arguments, and what `pg_locks` shows for it.
    fn key(&self, name: &LockName) -> Result<(&'static str, Vec<Value>, [i64; 3]), String> {
        match name {
            LockName::Device(d) => {
                let d = d.clone();
                let key = self
                    .admin
                    .call(move |c| {
                        c.execute(
                            "INSERT INTO device_keys (device) VALUES (?1) ON CONFLICT (device) DO NOTHING",
                            &vals![&d],
                        )?;
                        c.query("SELECT key FROM device_keys WHERE device = ?1", &vals![&d])?[0].get::<i64>(0)
                    })
                    .map_err(|e| e.to_string())?;
                Ok(("?1", vals![key].to_vec(), [key >> 32, key & 0xffff_ffff, 1]))
            }
            LockName::Waiter { token, .. } => {
                let (a, b) = token.split_once('-').ok_or("bad token")?;
                let (a, b): (i64, i64) = (a.parse().map_err(|_| "bad token")?, b.parse().map_err(|_| "bad token")?);
                Ok(("?1, ?2", vals![a, b].to_vec(), [a, b, 2]))
            }
        }
    }
}

impl Locks for PgLocks {
    fn lock(&self, name: &LockName, wait: bool) -> Result<Option<Box<dyn Held>>, String> {
        let (args, params, _) = self.key(name)?;
        let session = PgOwner::connect(&self.url.with_keepalives().named("lab-lock")).map_err(|e| e.to_string())?;
        // The session is the lock: the server's timeouts must not end it or its wait (a
        // role's `statement_timeout` would cut a wait short; `idle_session_timeout`, from
        // PostgreSQL 14, would free a held lock while its holder still works). Only the
        // settings this server has are set.
        session
            .call(|c| {
                c.query(
                    "SELECT set_config(name, '0', false) FROM pg_settings WHERE name IN
                        ('statement_timeout', 'lock_timeout', 'idle_session_timeout',
                         'idle_in_transaction_session_timeout')",
                    &[],
                )
            })
            .map_err(|e| e.to_string())?;
        let got = if wait {
            let sql = format!("SELECT pg_advisory_lock({args})");
            session.call(move |c| c.execute(&sql, &params).map(|_| true))
        } else {
            let sql = format!("SELECT pg_try_advisory_lock({args})");
            session.call(move |c| c.query(&sql, &params)?[0].get::<bool>(0))
        }
        .map_err(|e| e.to_string())?;
        Ok(got.then(|| Box::new(Session(session)) as Box<dyn Held>))
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
