//! Finding the lab and opening what commands share.

use std::path::Path;

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

/// The absolute paths a service unit names: this `lab` binary, the lab file, and its folder
/// to run in.
pub fn unit_paths(lab: &Lab) -> Result<crate::schedule::Paths, CliError> {
    let abs = |p: &Path| -> Result<std::path::PathBuf, CliError> {
        p.canonicalize().map_err(|e| CliError::bad_input(format!("{}: {e}", p.display())))
    };
    let binary = std::env::current_exe().map_err(CliError::internal)?;
    let lab_file = abs(&lab.source)?;
    Ok(crate::schedule::Paths {
        binary: abs(&binary)?,
        workdir: lab_file.parent().map(Path::to_path_buf).unwrap_or_else(|| "/".into()),
        lab: lab_file,
    })
}

pub fn open_store(lab: &Lab) -> Result<Store, CliError> {
    Ok(Store::open_at(&lab.store)?)
}

/// Opens the store for reading only; `None` for a lab that never ran anything.
pub fn open_store_existing(lab: &Lab) -> Result<Option<Store>, CliError> {
    Ok(Store::open_existing_at(&lab.store)?)
}

/// Where the store is, as users are shown it.
pub fn display_store(lab: &Lab) -> String {
    crate::store::shown_location(&lab.store)
}

pub use crate::fs::display_path;

/// The lab's store; an error that says how to make one when there is none.
pub fn existing_store(lab: &Lab) -> Result<Store, CliError> {
    open_store_existing(lab)?.ok_or_else(|| {
        CliError::bad_input(format!(
            "no store at {}; fix: run a campaign first (lab run runbooks/quickstart.toml)",
            display_store(lab)
        ))
    })
}

/// This machine's name, as leases and schedule slots name their holder.
pub fn hostname() -> String {
    crate::store::this_host()
}
