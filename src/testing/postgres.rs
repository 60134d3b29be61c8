//! A fresh PostgreSQL database for a test, on the server `LAB_TEST_POSTGRES` names (a
//! throwaway cluster: `eval "$(tests/pg-cluster.sh)"`; `.ci/run` starts one). Tests that
//! use it carry `#[test_needs::needs(postgres)]`.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::store::{PgOwner, PgUrl};

/// A new, empty database; its URL (with the server's password).
pub fn fresh_database() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let admin = std::env::var("LAB_TEST_POSTGRES")
        .expect("LAB_TEST_POSTGRES is not set: start a throwaway server with `eval \"$(tests/pg-cluster.sh)\"`");
    let name = format!("lab_t{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let owner = PgOwner::connect(&PgUrl::parse(&admin).unwrap()).unwrap();
    let create = format!("CREATE DATABASE {name}");
    owner.call(move |c| c.batch(&create)).unwrap();
    // The admin URL with the new database's name in place of its own.
    let (base, _) = admin.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}

/// A store on a fresh PostgreSQL database.
pub fn store() -> crate::store::Store {
    crate::store::Store::open_postgres(&PgUrl::parse(&fresh_database()).unwrap()).unwrap()
}

/// A store in a fresh SQLite file (and the folder that keeps it).
pub fn sqlite_store() -> (tempfile::TempDir, crate::store::Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = crate::store::Store::open(&dir.path().join("lab.db")).unwrap();
    (dir, s)
}

/// `on_both!(a, b)`: the tests `on_sqlite::a` and `on_postgres::a` (…), each calling
/// `a(&Store)` on a fresh store of its backend.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[test]
                fn $name() {
                    let (_dir, s) = $crate::testing::postgres::sqlite_store();
                    super::$name(&s);
                }
            )*
        }
        mod on_postgres {
            $(
                #[test_needs::needs(postgres)]
                #[test]
                fn $name() {
                    super::$name(&$crate::testing::postgres::store());
                }
            )*
        }
    };
}
pub(crate) use on_both;
