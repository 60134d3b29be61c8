//! `StoreError`: what a store operation can fail with, on either backend.

use std::path::PathBuf;

use super::backend::DbError;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {path}: {source}; fix: check the path and permissions, or delete a corrupt file")]
    Open { path: PathBuf, source: rusqlite::Error },
    #[error("store {path} does not exist; fix: run `lab run RUNBOOK` first, or pass --lab for another lab")]
    Missing { path: PathBuf },
    #[error("store: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("store: bad JSON in column: {0}")]
    Json(#[from] serde_json::Error),
    #[error("no campaign `{0}` in the store; fix: `lab status` lists campaigns")]
    NoCampaign(String),
    #[error("store task: {0}")]
    Internal(String),
    /// The PostgreSQL server cannot be reached, or refused this user (said without the password).
    #[error("store: {0}")]
    Unreachable(String),
    #[error("attempt {attempt} of trial {trial} in campaign {campaign} is already recorded")]
    Duplicate { campaign: String, trial: u32, attempt: u32 },
}

impl From<DbError> for StoreError {
    /// A backend's error as the store's.
    fn from(e: DbError) -> StoreError {
        match e {
            DbError::Sqlite(e) => StoreError::Sql(e),
            DbError::Closed(m) => StoreError::Unreachable(format!("the connection to the store was lost ({m})")),
            e => StoreError::Internal(e.to_string()),
        }
    }
}
