//! `Conn`: one connection to the store's database, whichever backend. A store operation
//! is written once against it, in one SQL text: `?1`, `?2`, … for parameters (rewritten to
//! `$1`, `$2`, … for PostgreSQL), `RETURNING` for generated keys, `ON CONFLICT` for
//! upserts, `CAST(… AS BIGINT)` where PostgreSQL would widen a sum to `numeric`, and
//! `CAST(?1 AS TEXT)` where a parameter's type is not clear from where it stands (`?1 IS NULL`). What
//! really differs (DDL, the bulk load, locks) stays in the backend files.

use super::value::{Row, Value};

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL's own message (the server's, with its SQLSTATE), never the URL.
    #[error("PostgreSQL: {0}")]
    Postgres(String),
    /// TLS, or a connection refused (`pg_tls`).
    #[error("PostgreSQL: {0}")]
    Tls(Box<super::pg_tls::TlsError>),
    /// A value of an unexpected type.
    #[error("unexpected value: {0}")]
    Type(String),
    /// The connection is gone (its thread ended).
    #[error("the database connection is closed: {0}")]
    Closed(String),
}

impl From<postgres::Error> for DbError {
    fn from(e: postgres::Error) -> DbError {
        if e.is_closed() || e.as_db_error().is_some_and(|d| d.code().code().starts_with("57P")) {
            // The session is gone (the server restarted, or ended it: SQLSTATE class 57P).
            return DbError::Closed(e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_string()));
        }
        DbError::Postgres(match e.as_db_error() {
            Some(db) => format!("{} ({})", db.message(), db.code().code()),
            // With its causes: "error performing TLS handshake" alone does not say which.
            None => {
                let mut text = e.to_string();
                let mut cause = std::error::Error::source(&e);
                while let Some(c) = cause {
                    text = format!("{text}: {c}");
                    cause = c.source();
                }
                text
            }
        })
    }
}

impl From<super::pg_tls::TlsError> for DbError {
    fn from(e: super::pg_tls::TlsError) -> DbError {
        DbError::Tls(Box::new(e))
    }
}

/// Which backend a connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

pub trait Conn {
    fn dialect(&self) -> Dialect;
    /// Runs one statement; the number of rows it changed.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError>;
    /// Runs one query; every row.
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError>;
    /// Runs one query and hands each row to `f` as it comes, without holding them all:
    /// the path for a campaign's million measurements.
    fn query_each(
        &mut self,
        sql: &str,
        params: &[Value],
        f: &mut dyn FnMut(Row) -> Result<(), DbError>,
    ) -> Result<(), DbError>;
    /// PostgreSQL's `COPY (query) TO STDOUT (FORMAT binary)`: each row's fields, `None`
    /// for NULL, as the binary format has them (`pg_copy`). A query without parameters:
    /// what varies is written into it as literals. Not on SQLite.
    fn copy_out(&mut self, query: &str, f: &mut super::pg_copy::EachRow<'_>) -> Result<(), DbError> {
        let _ = (query, f);
        Err(DbError::Type("COPY is PostgreSQL's".into()))
    }
    /// A number that moves when another connection commits a write, for a watcher that
    /// redraws only then; reads no table. SQLite: `PRAGMA data_version`.
    fn data_version(&mut self) -> Result<i64, DbError> {
        let rows = self.query("PRAGMA data_version", &[])?;
        rows.first().ok_or_else(|| DbError::Type("no data version".into()))?.read()
    }
    /// Runs statements without parameters, `;`-separated.
    fn batch(&mut self, sql: &str) -> Result<(), DbError>;
    /// Starts a transaction that writes (SQLite: `BEGIN IMMEDIATE`, so two writers queue
    /// at its start rather than fail at their first write).
    fn begin(&mut self) -> Result<(), DbError>;
    /// Starts a transaction that only reads, all of it from one snapshot (SQLite: a
    /// deferred `BEGIN`, whose snapshot is its first read; PostgreSQL: `REPEATABLE READ`).
    fn begin_read(&mut self) -> Result<(), DbError>;
    fn commit(&mut self) -> Result<(), DbError>;
    fn rollback(&mut self) -> Result<(), DbError>;
}

impl dyn Conn + '_ {
    /// The first row, if any.
    pub fn query_opt(&mut self, sql: &str, params: &[Value]) -> Result<Option<Row>, DbError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Runs `f` in a read-only transaction on one snapshot (see [`Conn::begin_read`]).
    pub fn read_transaction<T>(&mut self, f: impl FnOnce(&mut dyn Conn) -> Result<T, DbError>) -> Result<T, DbError> {
        self.begin_read()?;
        let out = f(self);
        // Nothing was written: ending it either way is the same.
        let end = self.rollback();
        let v = out?;
        end?;
        Ok(v)
    }

    /// Runs `f` in a transaction: committed when it returns `Ok`, rolled back otherwise.
    pub fn transaction<T>(&mut self, f: impl FnOnce(&mut dyn Conn) -> Result<T, DbError>) -> Result<T, DbError> {
        self.begin()?;
        match f(self) {
            Ok(v) => {
                self.commit()?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.rollback();
                Err(e)
            }
        }
    }
}
