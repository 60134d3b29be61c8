//! [`Conn`] on PostgreSQL (the `postgres` crate, tokio-postgres underneath): statements
//! prepared once per connection, parameters converted to the types the server asks for,
//! and columns read back as [`Value`]s.

use std::collections::HashMap;

use postgres::types::{ToSql, Type};

use super::conn::{Conn, DbError, Dialect};
use super::value::{Row, Value};

/// The longest statement text kept prepared.
const MAX_KEPT_SQL: usize = 2048;

/// A PostgreSQL connection with its prepared statements.
pub struct PgClient {
    pub(super) client: postgres::Client,
    statements: HashMap<String, postgres::Statement>,
    /// A transaction begun by one call is open (another call will end it): a call that
    /// loses the connection then is not run again on a new one, outside it.
    pub(super) in_transaction: bool,
    /// Where this connection's data versions start, apart from every other connection's
    /// of this process (a new connection after a lost one never repeats an old version),
    /// and the notifications seen since; `None` until the first version is asked for.
    notified: Option<i64>,
}

/// Connections made by this process: each one's data versions start at its number × 2⁴⁰.
static CONNECTIONS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1);

impl PgClient {
    pub fn new(client: postgres::Client) -> PgClient {
        PgClient { client, statements: HashMap::new(), in_transaction: false, notified: None }
    }

    fn statement(&mut self, sql: &str) -> Result<postgres::Statement, DbError> {
        if let Some(st) = self.statements.get(sql) {
            return Ok(st.clone());
        }
        let st = self.client.prepare(&placeholders(sql))?;
        // Multi-row inserts come in as many texts as batch sizes: those are prepared for
        // the one use (a round trip), not kept on the server for the session's life.
        if sql.len() <= MAX_KEPT_SQL {
            self.statements.insert(sql.to_string(), st.clone());
        }
        Ok(st)
    }

    fn bind(st: &postgres::Statement, params: &[Value]) -> Result<Vec<Box<dyn ToSql + Sync>>, DbError> {
        if st.params().len() != params.len() {
            return Err(DbError::Type(format!("{} parameters for {} placeholders", params.len(), st.params().len())));
        }
        st.params().iter().zip(params).map(|(ty, v)| typed(v, ty)).collect()
    }
}

/// `?N` → `$N`, outside quotes and comments.
pub fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            '?' if chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
            c => out.push(c),
        }
    }
    out
}

/// `v` as the Rust type PostgreSQL's `ty` takes.
fn typed(v: &Value, ty: &Type) -> Result<Box<dyn ToSql + Sync>, DbError> {
    let wrong = || DbError::Type(format!("{v:?} for a parameter of type {ty}"));
    let int = |i: i64| -> Result<Box<dyn ToSql + Sync>, DbError> {
        Ok(match *ty {
            Type::INT8 => Box::new(i),
            Type::INT4 => Box::new(i32::try_from(i).map_err(|_| wrong())?),
            Type::INT2 => Box::new(i16::try_from(i).map_err(|_| wrong())?),
            Type::OID => Box::new(u32::try_from(i).map_err(|_| wrong())?),
            Type::FLOAT8 => Box::new(i as f64),
            Type::BOOL => Box::new(i != 0),
            Type::TEXT | Type::VARCHAR => Box::new(i.to_string()),
            _ => return Err(wrong()),
        })
    };
    Ok(match v {
        Value::Null => match *ty {
            Type::INT8 => Box::new(None::<i64>),
            Type::INT4 => Box::new(None::<i32>),
            Type::INT2 => Box::new(None::<i16>),
            Type::FLOAT8 => Box::new(None::<f64>),
            Type::FLOAT4 => Box::new(None::<f32>),
            Type::BOOL => Box::new(None::<bool>),
            Type::BYTEA => Box::new(None::<Vec<u8>>),
            _ => Box::new(None::<String>),
        },
        Value::Int(i) => int(*i)?,
        Value::Real(f) => match *ty {
            Type::FLOAT8 => Box::new(*f),
            Type::FLOAT4 => Box::new(*f as f32),
            _ => return Err(wrong()),
        },
        Value::Text(s) => match *ty {
            Type::BYTEA => return Err(wrong()),
            _ => Box::new(s.clone()),
        },
        Value::Blob(b) => match *ty {
            Type::BYTEA => Box::new(b.clone()),
            _ => return Err(wrong()),
        },
    })
}

/// Column `i` of `row` as a [`Value`].
fn column(row: &postgres::Row, i: usize) -> Result<Value, DbError> {
    let ty = row.columns()[i].type_().clone();
    let v = match ty {
        Type::INT8 => row.try_get::<_, Option<i64>>(i)?.map(Value::Int),
        Type::INT4 => row.try_get::<_, Option<i32>>(i)?.map(|v| Value::Int(v.into())),
        Type::INT2 => row.try_get::<_, Option<i16>>(i)?.map(|v| Value::Int(v.into())),
        Type::OID => row.try_get::<_, Option<u32>>(i)?.map(|v| Value::Int(v.into())),
        Type::BOOL => row.try_get::<_, Option<bool>>(i)?.map(|v| Value::Int(v.into())),
        Type::FLOAT8 => row.try_get::<_, Option<f64>>(i)?.map(Value::Real),
        Type::FLOAT4 => row.try_get::<_, Option<f32>>(i)?.map(|v| Value::Real(v.into())),
        Type::BYTEA => row.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            row.try_get::<_, Option<String>>(i)?.map(Value::Text)
        }
        other => {
            return Err(DbError::Type(format!(
                "column {} is of type {other}; cast it in the query (e.g. CAST(… AS BIGINT))",
                row.columns()[i].name()
            )));
        }
    };
    Ok(v.unwrap_or(Value::Null))
}

impl Conn for PgClient {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError> {
        let st = self.statement(sql)?;
        let bound = Self::bind(&st, params)?;
        let refs: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|b| b.as_ref()).collect();
        Ok(self.client.execute(&st, &refs)?)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError> {
        let st = self.statement(sql)?;
        let bound = Self::bind(&st, params)?;
        let refs: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|b| b.as_ref()).collect();
        let rows = self.client.query(&st, &refs)?;
        rows.iter().map(|r| (0..r.len()).map(|i| column(r, i)).collect::<Result<Vec<_>, _>>().map(Row)).collect()
    }

    fn query_each(
        &mut self,
        sql: &str,
        params: &[Value],
        f: &mut dyn FnMut(Row) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        use postgres::fallible_iterator::FallibleIterator;
        let row = |r: &postgres::Row| (0..r.len()).map(|i| column(r, i)).collect::<Result<Vec<_>, _>>().map(Row);
        if self.in_transaction {
            // A cursor, fetched 8 192 rows at a time: the sync client's cost is per call
            // into its runtime, and a row iterator makes one per row.
            let st = self.statement(&format!("DECLARE lab_each NO SCROLL CURSOR FOR {sql}"))?;
            let bound = Self::bind(&st, params)?;
            let refs: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|b| b.as_ref()).collect();
            self.client.execute(&st, &refs)?;
            let fetched = (|| -> Result<(), DbError> {
                loop {
                    let rows = self.client.query("FETCH 8192 FROM lab_each", &[])?;
                    if rows.is_empty() {
                        return Ok(());
                    }
                    for r in &rows {
                        f(row(r)?)?;
                    }
                }
            })();
            let closed = self.client.batch_execute("CLOSE lab_each");
            fetched?;
            return Ok(closed?);
        }
        let st = self.statement(sql)?;
        let bound = Self::bind(&st, params)?;
        let mut rows = self.client.query_raw(&st, bound.iter().map(|b| b.as_ref()))?;
        while let Some(r) = rows.next()? {
            f(row(&r)?)?;
        }
        Ok(())
    }

    fn copy_out(&mut self, query: &str, f: &mut super::pg_copy::EachRow<'_>) -> Result<(), DbError> {
        let mut reader = self.client.copy_out(&format!("COPY ({query}) TO STDOUT (FORMAT binary)"))?;
        super::pg_copy::each_row(&mut reader, f)
    }

    fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        Ok(self.client.batch_execute(sql)?)
    }

    fn begin(&mut self) -> Result<(), DbError> {
        self.client.batch_execute("BEGIN")?;
        self.in_transaction = true;
        Ok(())
    }

    fn begin_read(&mut self) -> Result<(), DbError> {
        self.client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
        self.in_transaction = true;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), DbError> {
        self.in_transaction = false;
        Ok(self.client.batch_execute("COMMIT")?)
    }

    /// The notifications of other sessions' commits (`lab_changes`, sent by every table's
    /// trigger: `pg_schema`) seen since this connection first asked, on top of its own
    /// start. It starts listening then: a connection that never asks is sent none. The
    /// round trip first lets the server pass on what was committed before it.
    fn data_version(&mut self) -> Result<i64, DbError> {
        use postgres::fallible_iterator::FallibleIterator;
        let mut seen = match self.notified {
            Some(n) => {
                self.client.batch_execute("")?;
                n
            }
            None => {
                // Listening first, then a watcher (`pg_schema`'s last `lab_notify` notifies only
                // while one is): its lock ends with this session, and rows of watchers gone
                // are removed.
                self.client.batch_execute(&format!(
                    "LISTEN lab_changes;
                     SELECT pg_advisory_lock({lock} + pg_backend_pid());
                     DELETE FROM lab_watchers w WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.pid);
                     INSERT INTO lab_watchers (pid, since) VALUES (pg_backend_pid(), CAST(now() AS TEXT))
                         ON CONFLICT (pid) DO NOTHING;",
                    lock = super::pg_schema::WATCHER_LOCK
                ))?;
                CONNECTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) << 40
            }
        };
        let mut pending = self.client.notifications();
        let mut it = pending.iter();
        while it.next()?.is_some() {
            seen += 1;
        }
        self.notified = Some(seen);
        Ok(seen)
    }

    fn rollback(&mut self) -> Result<(), DbError> {
        self.in_transaction = false;
        Ok(self.client.batch_execute("ROLLBACK")?)
    }
}

#[cfg(test)]
mod tests {
    use super::placeholders;

    #[test]
    fn placeholders_are_rewritten_outside_quotes_and_comments() {
        assert_eq!(
            placeholders("SELECT '?1', \"a?2\", ?1 -- ?3\n FROM t WHERE x = ?12 AND y = ?"),
            "SELECT '?1', \"a?2\", $1 -- ?3\n FROM t WHERE x = $12 AND y = ?"
        );
    }
}
