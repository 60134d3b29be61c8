//! The store's two backends behind one connection type: SQLite (embedded, the default)
//! and PostgreSQL (a lab that spans machines). See docs/shared-lab.md.

mod conn;
mod db;
mod file_locks;
mod from_row;
mod locks;
mod per_url;
mod pg_copy;
mod pg_listen;
mod pg_locks;
mod pg_owner;
mod pg_password;
mod pg_schema;
mod pg_tls;
mod postgres_conn;
mod sqlite_conn;
mod sqlite_open;
#[cfg(test)]
mod tests;
mod value;

pub use crate::config::PgUrl;
pub use conn::{Conn, DbError, Dialect};
pub use db::Db;
pub use file_locks::FileLocks;
pub use from_row::{Columns, FromRow, read_all};
pub use locks::{Held, LockError, LockName, Locks, Owner, new_token, split_alive};
pub use pg_copy::{copy_out_async, float8, int8, text as copy_text};
pub use pg_listen::{Heard, listen as pg_listen};
pub use pg_locks::PgLocks;
pub use pg_owner::PgOwner;
pub use pg_password::PasswordError;
pub use pg_schema::migrate_postgres;
pub use pg_tls::{RootCertsProblem, TlsError};
pub(crate) use pg_tls::{connect_async, on_own_runtime};
pub use postgres_conn::placeholders;
#[cfg(test)]
pub use sqlite_open::WAL_CHECKPOINT_PAGES;
pub use sqlite_open::{lock_dir, open_sqlite};
pub(crate) use value::vals;
pub use value::{FromValue, Row, Value};
