//! `Db`: the store's database, whichever backend, as operations run on it: each store
//! operation is one closure over a [`Conn`], run where the connection lives (SQLite:
//! under its mutex on the calling thread; PostgreSQL: on the connection's owner thread).

use std::sync::{Arc, Mutex};

use super::conn::{Conn, DbError};
use super::pg_owner::PgOwner;

#[derive(Clone, Debug)]
pub enum Db {
    Sqlite(Arc<Mutex<rusqlite::Connection>>),
    Postgres(Arc<PgOwner>),
}

impl Db {
    /// Runs `f` on the connection. On PostgreSQL, `f` runs once more on a new connection
    /// when the server ended the one it ran on (a restart, a failover): what it did there
    /// was rolled back with the session, unless the loss came between a commit and its
    /// answer, which each write's key makes harmless (a second insert is refused, an
    /// upsert writes the same).
    pub fn call<T: Send + 'static>(
        &self,
        mut f: impl FnMut(&mut dyn Conn) -> Result<T, DbError> + Send + 'static,
    ) -> Result<T, DbError> {
        match self {
            Db::Sqlite(conn) => f(&mut *conn.lock().unwrap_or_else(|p| p.into_inner())),
            Db::Postgres(owner) => owner.call(f),
        }
    }
}
