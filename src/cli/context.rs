//! Finding the lab and opening what commands share.

use std::path::{Path, PathBuf};

use super::exit::CliError;
use crate::config::{self, Lab};
use crate::store::Store;

/// The repository's `lab.toml`, built in: the default lab needs no hardware.
pub const EMBEDDED_LAB: &str = include_str!("../../lab.toml");

/// `--lab FILE`, else `./lab.toml`, else the built-in default lab (paths relative to the
/// current folder).
pub fn load_lab(arg: Option<&Path>) -> Result<Lab, CliError> {
    match arg {
        Some(p) => Ok(config::load_lab(p)?),
        None if Path::new("lab.toml").exists() => Ok(config::load_lab(Path::new("lab.toml"))?),
        None => Ok(config::parse_lab(EMBEDDED_LAB, Path::new("<embedded>"))?),
    }
}

pub fn open_store(lab: &Lab) -> Result<Store, CliError> {
    Ok(Store::open(&lab.store_path)?)
}

/// Opens the store for reading only; a lab that never ran anything has none.
pub fn open_store_existing(lab: &Lab) -> Result<Option<Store>, CliError> {
    if !lab.store_path.exists() {
        return Ok(None);
    }
    Ok(Some(Store::open_existing(&lab.store_path)?))
}

pub fn display_path(p: &Path) -> String {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    p.strip_prefix(&cwd).unwrap_or(p).display().to_string()
}

/// This machine's name, as leases and schedule slots name their holder.
pub fn hostname() -> String {
    crate::store::this_host()
}
