//! `lab report [CAMPAIGN]`, and the report files written after `lab run`.

use std::path::Path;

use super::args::{ReportArgs, ReportFormat};
use super::context::{self, display_path};
use super::exit::CliError;
use crate::store::Store;

pub fn run(lab_arg: Option<&Path>, args: &ReportArgs) -> Result<String, CliError> {
    let lab = context::load_lab(lab_arg)?;
    let store = context::open_store_existing(&lab)?.ok_or_else(|| {
        CliError::bad_input(format!(
            "no store at {}; fix: run a campaign first (lab run runbooks/quickstart.toml)",
            display_path(&lab.store_path)
        ))
    })?;
    let id = match &args.campaign {
        Some(id) => id.clone(),
        None => store.campaigns()?.first().map(|c| c.id.clone()).ok_or_else(|| {
            CliError::bad_input("the store has no campaigns yet; fix: lab run runbooks/quickstart.toml")
        })?,
    };
    let _ = (&store, &id, args.format == ReportFormat::Table);
    todo!("report rendering")
}

/// Writes report.md, results.csv and report.json into `dir`; returns their paths.
pub fn write_files(store: &Store, id: &str, dir: &Path) -> Result<Vec<String>, CliError> {
    let _ = (store, id, dir);
    Ok(Vec::new())
}

/// The per-variant tables printed at the end of `lab run`.
pub fn table(store: &Store, id: &str) -> Result<String, CliError> {
    let _ = (store, id);
    Ok(String::new())
}
