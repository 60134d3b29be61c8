//! `lab store copy FROM TO`: a store's campaigns and history into another store, SQLite
//! into PostgreSQL or back (docs/shared-lab.md, "Moving a store").

use std::ops::ControlFlow;

use super::context::display_path;
use super::exit::CliError;
use crate::config::{Lab, StoreLocation};
use crate::store::{CopyProgress, Store};

#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    pub command: StoreCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum StoreCommand {
    /// Copy every campaign, its trials, attempts, measurements and series, and the
    /// schedule's history into another store, each campaign whole or not at all: run it
    /// again after an interruption and it goes on where it stopped.
    Copy(CopyArgs),
}

#[derive(Debug, clap::Args)]
pub struct CopyArgs {
    /// The store to copy: a SQLite file, or postgres://USER@HOST:PORT/DATABASE.
    pub from: String,
    /// The store to copy into (made if it is a SQLite file not there yet).
    pub to: String,
}

pub fn run(lab: &Lab, args: &StoreArgs) -> Result<String, CliError> {
    let StoreCommand::Copy(a) = &args.command;
    let (from, to) = (location(lab, "FROM", &a.from)?, location(lab, "TO", &a.to)?);
    if shown(&from) == shown(&to) {
        return Err(CliError::bad_input(format!(
            "FROM and TO are one store ({}); fix: name another store to copy into",
            shown(&from)
        )));
    }
    let from_store = open(lab, &from, false)?;
    let to_store = open(lab, &to, true)?;
    let summary = from_store.copy_into(&to_store, &mut |p| {
        // Progress on stderr as each campaign is in: a long copy shows it is going.
        match p {
            CopyProgress::Campaign { id, index, total, rows, skipped: false } => {
                eprintln!("[{index}/{total}] {id}: {rows} rows copied")
            }
            CopyProgress::Campaign { id, index, total, skipped: true, .. } => {
                eprintln!("[{index}/{total}] {id}: there already")
            }
            CopyProgress::Rest { rows } => eprintln!("schedule, devices and alerts: {rows} rows copied"),
        }
        ControlFlow::Continue(())
    })?;
    Ok(format!(
        "copied {} campaigns ({} rows) from {} to {}; {} were there already\n",
        summary.copied,
        summary.rows,
        shown(&from),
        shown(&to),
        summary.skipped
    ))
}

/// FROM or TO as a store location; the lab file's own store keeps its password command.
fn location(lab: &Lab, which: &str, text: &str) -> Result<StoreLocation, CliError> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let loc = crate::config::store_location(text, &cwd)
        .map_err(|e| CliError::bad_input(format!("{which}: {e}; fix: {}", e.fix())))?;
    Ok(match (loc, &lab.store) {
        (StoreLocation::Postgres { url, .. }, StoreLocation::Postgres { url: own, password_command })
            if url.shown() == own.shown() =>
        {
            StoreLocation::Postgres { url, password_command: password_command.clone() }
        }
        (loc, _) => loc,
    })
}

fn shown(loc: &StoreLocation) -> String {
    match loc {
        StoreLocation::Sqlite(p) => display_path(p),
        StoreLocation::Postgres { url, .. } => url.shown().to_string(),
    }
}

fn open(lab: &Lab, loc: &StoreLocation, create: bool) -> Result<Store, CliError> {
    let mut one = lab.clone();
    one.store = loc.clone();
    match loc {
        StoreLocation::Sqlite(p) if !create && !p.exists() => Err(CliError::bad_input(format!(
            "no store at {}; fix: name an existing SQLite file or a postgres:// URL",
            display_path(p)
        ))),
        _ => super::context::open_store(&one),
    }
}
