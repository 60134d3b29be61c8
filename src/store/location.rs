//! `Location`: where a store is, on either backend.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where a store is: a SQLite file, or a PostgreSQL database named by its URL as shown
/// (without its password): never a URL in a path's clothes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Location {
    /// The SQLite file, if the store is one.
    pub fn sqlite_file(&self) -> Option<&Path> {
        match self {
            Location::Sqlite(path) => Some(path),
            Location::Postgres(_) => None,
        }
    }
}

/// The file's path, or the URL as shown: how messages name the store.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => path.display().fmt(f),
            Location::Postgres(shown) => f.write_str(shown),
        }
    }
}
