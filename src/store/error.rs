//! `StoreError`: what a store operation can fail with, on either backend.

use std::path::PathBuf;

use super::backend::{DbError, LockError};
use super::location::Location;

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
    /// A backend's error other than SQLite's own and a lost connection.
    #[error("store task: {0}")]
    Db(Box<DbError>),
    /// A lock of a device's queue could not be taken while joining it.
    #[error("store task: joining the queue of {device}: {source}")]
    JoinQueue { device: String, source: Box<LockError> },
    /// A lock could not be waited for, or the wait was given up.
    #[error("store task: waiting for {device}: {source}")]
    Wait { device: String, source: Box<LockError> },
    /// Code written for SQLite alone (`store/mod.rs` lists it) ran on PostgreSQL.
    #[error("store task: {at}: a SQLite-only path was taken on the PostgreSQL store {store}")]
    SqliteOnly { at: &'static std::panic::Location<'static>, store: Box<Location> },
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
            e => StoreError::Db(Box::new(e)),
        }
    }
}

impl StoreError {
    /// The same error again, for each of several callers one write failed for (a batch's
    /// attempts, the attempts that began together): a lost connection stays one (the
    /// recorder tries again once it is back), a duplicate stays one, anything else is told
    /// in words (`StoreError` is not `Clone`).
    pub fn copied(&self) -> StoreError {
        match self {
            StoreError::Duplicate { campaign, trial, attempt } => {
                StoreError::Duplicate { campaign: campaign.clone(), trial: *trial, attempt: *attempt }
            }
            StoreError::Unreachable(m) => StoreError::Unreachable(m.clone()),
            other => StoreError::Internal(other.to_string()),
        }
    }
}
