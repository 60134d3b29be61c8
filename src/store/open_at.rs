//! Opening the store a lab file names: its SQLite file or its PostgreSQL server.

use crate::config::StoreLocation;

use super::{Store, StoreError};

/// Why the store a lab file names could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// `[lab] store_password_command` failed or printed nothing: the lab file's to fix.
    #[error(transparent)]
    Password(#[from] super::backend::PasswordError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Store {
    /// The store at `location`, made when it is not there yet.
    pub fn open_at(location: &StoreLocation) -> Result<Store, OpenError> {
        match location {
            StoreLocation::Sqlite(path) => Ok(Store::open(path)?),
            StoreLocation::Postgres { url, password_command } => {
                let url = url.with_password(password_command)?;
                Ok(Store::open_postgres(&url)?)
            }
        }
    }

    /// The store at `location` for reading only; a lab that never ran anything has none
    /// (a SQLite file not yet made; a PostgreSQL store is always there once reachable).
    pub fn open_existing_at(location: &StoreLocation) -> Result<Option<Store>, OpenError> {
        match location {
            StoreLocation::Sqlite(path) if !path.exists() => Ok(None),
            StoreLocation::Sqlite(path) => Ok(Some(Store::open_existing(path)?)),
            StoreLocation::Postgres { .. } => Store::open_at(location).map(Some),
        }
    }
}

/// Where the store is, as users are shown it: a path relative to here, or the URL
/// without its password.
pub fn shown_location(location: &StoreLocation) -> String {
    match location {
        StoreLocation::Sqlite(path) => crate::fs::display_path(path),
        StoreLocation::Postgres { url, .. } => url.shown().to_string(),
    }
}
