//! [`Conn`] on SQLite (rusqlite, bundled): the embedded default, which needs nothing.

use rusqlite::types::{ToSqlOutput, ValueRef};

use super::conn::{Conn, DbError, Dialect};
use super::value::{Row, Value};

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Value::Real(f) => ToSqlOutput::Borrowed(ValueRef::Real(*f)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

fn value(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

fn execute(c: &rusqlite::Connection, sql: &str, params: &[Value]) -> Result<u64, DbError> {
    let mut st = c.prepare_cached(sql)?;
    Ok(st.execute(rusqlite::params_from_iter(params))? as u64)
}

fn query(c: &rusqlite::Connection, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError> {
    let mut st = c.prepare_cached(sql)?;
    let n = st.column_count();
    let rows = st.query_map(rusqlite::params_from_iter(params), |r| {
        (0..n).map(|i| r.get_ref(i).map(value)).collect::<rusqlite::Result<Vec<_>>>().map(Row)
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

fn query_each(
    c: &rusqlite::Connection,
    sql: &str,
    params: &[Value],
    f: &mut dyn FnMut(Row) -> Result<(), DbError>,
) -> Result<(), DbError> {
    let mut st = c.prepare_cached(sql)?;
    let n = st.column_count();
    let mut rows = st.query(rusqlite::params_from_iter(params))?;
    while let Some(r) = rows.next()? {
        f(Row((0..n).map(|i| r.get_ref(i).map(value)).collect::<rusqlite::Result<Vec<_>>>()?))?;
    }
    Ok(())
}

impl Conn for rusqlite::Connection {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError> {
        execute(self, sql, params)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError> {
        query(self, sql, params)
    }

    fn query_each(
        &mut self,
        sql: &str,
        params: &[Value],
        f: &mut dyn FnMut(Row) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        query_each(self, sql, params, f)
    }

    fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        Ok(self.execute_batch(sql)?)
    }

    fn begin(&mut self) -> Result<(), DbError> {
        Ok(self.execute_batch("BEGIN IMMEDIATE")?)
    }

    fn begin_read(&mut self) -> Result<(), DbError> {
        Ok(self.execute_batch("BEGIN")?)
    }

    fn commit(&mut self) -> Result<(), DbError> {
        Ok(self.execute_batch("COMMIT")?)
    }

    fn rollback(&mut self) -> Result<(), DbError> {
        Ok(self.execute_batch("ROLLBACK")?)
    }
}

/// Inside a transaction rusqlite opened (the SQLite-only recording path, `store/mod.rs`):
/// statements run in it; it is committed by its owner, so nesting another is refused.
impl Conn for rusqlite::Transaction<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError> {
        execute(self, sql, params)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError> {
        query(self, sql, params)
    }

    fn query_each(
        &mut self,
        sql: &str,
        params: &[Value],
        f: &mut dyn FnMut(Row) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        query_each(self, sql, params, f)
    }

    fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        Ok(self.execute_batch(sql)?)
    }

    fn begin_read(&mut self) -> Result<(), DbError> {
        Err(DbError::Type("a transaction inside rusqlite's own".into()))
    }

    fn begin(&mut self) -> Result<(), DbError> {
        Err(DbError::Type("a transaction inside rusqlite's own".into()))
    }

    fn commit(&mut self) -> Result<(), DbError> {
        Err(DbError::Type("the transaction is committed by its owner".into()))
    }

    fn rollback(&mut self) -> Result<(), DbError> {
        Err(DbError::Type("the transaction is rolled back by its owner".into()))
    }
}
