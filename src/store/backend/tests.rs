//! The same statements on both backends: SQLite in memory, and a fresh PostgreSQL database.

use super::vals;
use super::{Conn, DbError, Dialect, PgOwner, PgUrl, Value};

fn table(c: &mut dyn Conn) {
    let ddl = match c.dialect() {
        Dialect::Sqlite => {
            "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, n INTEGER, \
                            x REAL, b BLOB)"
        }
        Dialect::Postgres => {
            "CREATE TABLE t (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, n BIGINT, \
                              x DOUBLE PRECISION, b BYTEA)"
        }
    };
    c.batch(ddl).unwrap();
}

/// Inserts with generated keys, NULLs, a parameter used twice, an upsert, a sum, and a
/// transaction rolled back.
fn round_trip(c: &mut dyn Conn) {
    table(c);
    let insert = "INSERT INTO t (name, n, x, b) VALUES (?1, ?2, ?3, ?4) RETURNING id";
    let a = c.query(insert, &vals!["a", 3_i64, 0.5, vec![0_u8, 1, 255]]).unwrap()[0].get::<i64>(0).unwrap();
    let b = c.query(insert, &vals!["b", None::<i64>, None::<f64>, None::<Vec<u8>>]).unwrap()[0].get::<i64>(0).unwrap();
    assert_eq!(b, a + 1);
    let changed = c
        .execute(
            "INSERT INTO t (name, n) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET n = t.n + ?2",
            &vals!["a", 4_u32],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let rows = c.query("SELECT name, n, x, b FROM t WHERE n = ?1 OR ?1 = 0 ORDER BY name", &vals![7_i64]).unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(
        (r.get::<String>(0).unwrap(), r.get::<u32>(1).unwrap(), r.get::<f64>(2).unwrap(), r.get::<Vec<u8>>(3).unwrap()),
        ("a".to_string(), 7, 0.5, vec![0, 1, 255])
    );
    let sum = c.query("SELECT CAST(SUM(n) AS BIGINT), count(*) FROM t", &[]).unwrap();
    assert_eq!((sum[0].get::<i64>(0).unwrap(), sum[0].get::<i64>(1).unwrap()), (7, 2));
    let none = c.query_opt("SELECT n, x FROM t WHERE name = ?1", &vals!["b"]).unwrap().unwrap();
    assert_eq!((none.get::<Option<i64>>(0).unwrap(), none.get::<Option<f64>>(1).unwrap()), (None, None));
    assert!(matches!(none.get::<i64>(0), Err(DbError::Type(_))), "NULL is not an integer");

    let failed: Result<(), DbError> = c.transaction(|c| {
        c.execute("INSERT INTO t (name) VALUES (?1)", &vals!["c"])?;
        c.execute("INSERT INTO t (name) VALUES (?1)", &vals!["a"])?; // unique: fails
        Ok(())
    });
    assert!(failed.is_err());
    assert_eq!(c.query("SELECT name FROM t ORDER BY name", &[]).unwrap().len(), 2, "rolled back whole");
    assert_eq!(c.query_opt("SELECT name FROM t WHERE name = ?1", &[Value::Text("c".into())]).unwrap(), None);
}

#[test]
fn statements_round_trip_on_sqlite() {
    let mut c = rusqlite::Connection::open_in_memory().unwrap();
    round_trip(&mut c);
}

#[test_needs::needs(postgres)]
#[test]
fn statements_round_trip_on_postgres() {
    let url = PgUrl::parse(&crate::testing::postgres::fresh_database()).unwrap();
    let owner = PgOwner::connect(&url).unwrap();
    owner
        .call(|c| {
            round_trip(c);
            Ok(())
        })
        .unwrap();
}

#[test_needs::needs(postgres)]
#[test]
fn a_refused_password_is_not_repeated() {
    let good = crate::testing::postgres::fresh_database();
    let (head, rest) = good.split_once('@').unwrap();
    let (user, _) = head.rsplit_once(':').unwrap();
    let bad = format!("{user}:wrong-pw-4711@{rest}");
    let e = PgOwner::connect(&PgUrl::parse(&bad).unwrap()).unwrap_err().to_string();
    assert!(!e.contains("wrong-pw-4711"), "{e}");
    assert!(e.contains("connecting to postgres://lab@127.0.0.1:"), "{e}");
    assert!(e.contains("password"), "{e}");
    // The async client's connections (a lock's session, a report's readers) say it alike.
    let e = super::on_own_runtime(super::connect_async(&PgUrl::parse(&bad).unwrap())).unwrap().unwrap_err().to_string();
    assert!(!e.contains("wrong-pw-4711"), "{e}");
    assert!(
        e.contains("connecting to postgres://lab@127.0.0.1:")
            && e.contains("fix: check the server, the user and its password"),
        "{e}"
    );
}
