//! Finding the lab and opening what commands share.

use std::path::{Path, PathBuf};

use super::exit::CliError;
use crate::config::{self, Lab, StoreLocation};
use crate::store::Store;

/// The repository's `lab.toml`, built in: the default lab needs no hardware.
pub const EMBEDDED_LAB: &str = include_str!("../../lab.toml");

/// `--lab FILE`, else `./lab.toml`, else the built-in default lab (paths relative to the
/// current folder).
pub fn load_lab(arg: Option<&Path>) -> Result<Lab, CliError> {
    let mut lab = match arg {
        Some(p) => config::load_lab(p)?,
        None if Path::new("lab.toml").exists() => config::load_lab(Path::new("lab.toml"))?,
        None => config::parse_lab(EMBEDDED_LAB, Path::new("<embedded>"))?,
    };
    // `LAB_STORE` names the store in place of `[lab] store` (a CI job's, a laptop's).
    if let Some(text) = std::env::var_os("LAB_STORE").filter(|t| !t.is_empty()) {
        let text = text
            .to_str()
            .ok_or_else(|| CliError::bad_input("LAB_STORE is not UTF-8; fix: set it to a path or a postgres:// URL"))?;
        let password_command = match &lab.store {
            StoreLocation::Postgres { password_command, .. } => password_command.clone(),
            StoreLocation::Sqlite(_) => Vec::new(),
        };
        lab.store = match config::store_location(text, &std::env::current_dir().unwrap_or_default()) {
            Ok(StoreLocation::Postgres { url, .. }) => StoreLocation::Postgres { url, password_command },
            Ok(other) => other,
            Err(e) => return Err(CliError::bad_input(format!("LAB_STORE: {e}; fix: {}", e.fix()))),
        };
    }
    Ok(lab)
}

/// `--host NAME` names a `[[host]]` of `lab`; else bad input naming the hosts there are.
pub fn check_host_arg(lab: &Lab, name: &str) -> Result<(), CliError> {
    if lab.hosts.iter().any(|h| h.name == name) {
        return Ok(());
    }
    let names: Vec<&str> = lab.hosts.iter().map(|h| h.name.as_str()).collect();
    Err(CliError::bad_input(format!(
        "--host {name}: no such [[host]] in {}; fix: use one of {}",
        lab.source.display(),
        names.join(", ")
    )))
}

pub fn open_store(lab: &Lab) -> Result<Store, CliError> {
    match &lab.store {
        StoreLocation::Sqlite(path) => Ok(Store::open(path)?),
        StoreLocation::Postgres { url, password_command } => open_postgres(url, password_command),
    }
}

fn open_postgres(url: &crate::store::PgUrl, password_command: &[String]) -> Result<Store, CliError> {
    let url = url.with_password(password_command).map_err(CliError::bad_input)?;
    Ok(Store::open_postgres(&url)?)
}

/// Opens the store for reading only; a lab that never ran anything has none (a SQLite
/// file not yet made; a PostgreSQL store is always there once reachable).
pub fn open_store_existing(lab: &Lab) -> Result<Option<Store>, CliError> {
    match &lab.store {
        StoreLocation::Sqlite(path) if !path.exists() => Ok(None),
        StoreLocation::Sqlite(path) => Ok(Some(Store::open_existing(path)?)),
        StoreLocation::Postgres { url, password_command } => open_postgres(url, password_command).map(Some),
    }
}

/// Where the store is, as users are shown it: a path relative to here, or the URL
/// without its password.
pub fn display_store(lab: &Lab) -> String {
    match &lab.store {
        StoreLocation::Sqlite(path) => display_path(path),
        StoreLocation::Postgres { url, .. } => url.shown().to_string(),
    }
}

pub fn display_path(p: &Path) -> String {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    p.strip_prefix(&cwd).unwrap_or(p).display().to_string()
}

/// This machine's name, as leases and schedule slots name their holder.
pub fn hostname() -> String {
    crate::store::this_host()
}
