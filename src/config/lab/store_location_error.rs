//! `StoreLocationError`: why `[lab] store` or `LAB_STORE` names no store. Neither the
//! message nor the fix repeats the text, which may hold a password.

const POSTGRES_FORM: &str = "`postgres://USER@HOST:PORT/DATABASE`";

#[derive(Debug, thiserror::Error)]
pub enum StoreLocationError {
    /// A `postgres://` URL that does not read.
    #[error("{0}")]
    Postgres(crate::config::PgUrlError),
    #[error("not a store this lab knows (a SQLite file path or a postgres:// URL)")]
    UnknownScheme,
    #[error("the store is empty")]
    Empty,
}

impl StoreLocationError {
    /// What to write instead.
    pub fn fix(&self) -> String {
        match self {
            StoreLocationError::Postgres(_) => format!("write {POSTGRES_FORM}"),
            StoreLocationError::UnknownScheme => {
                format!("write a file path such as `artifacts/lab.db`, or {POSTGRES_FORM}")
            }
            StoreLocationError::Empty => "write a file path such as `artifacts/lab.db`".into(),
        }
    }
}
