//! `lab history RUNBOOK [--metric M]... [--model M] [--variant V] [--format table|json|html]`:
//! every campaign of a runbook as one point per variant × model × metric, with its change
//! points and what the schedule's reviews found.

use std::path::{Path, PathBuf};

use super::context;
use super::context::existing_store;
use super::exit::CliError;
use crate::report::{self, HistoryError, HistoryFilter};

#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum HistoryFormat {
    Table,
    Json,
    Html,
}

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// A runbook name (as `lab status` lists campaigns), or a runbook file whose `name` is used.
    #[arg(value_name = "RUNBOOK")]
    pub runbook: String,
    /// Only this metric (repeatable); default: every metric.
    #[arg(long, value_name = "METRIC")]
    pub metric: Vec<String>,
    /// Only this device model.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Only this variant.
    #[arg(long, value_name = "VARIANT")]
    pub variant: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: HistoryFormat,
}

pub fn run(lab_arg: Option<&Path>, args: &HistoryArgs) -> Result<String, CliError> {
    let lab = context::load_lab(lab_arg)?;
    let file = PathBuf::from(&args.runbook);
    let name = if file.is_file() { crate::config::load_runbook(&file, &lab)?.name } else { args.runbook.clone() };
    let store = existing_store(&lab)?;
    let filter =
        HistoryFilter { metrics: args.metric.clone(), model: args.model.clone(), variant: args.variant.clone() };
    let history = report::history_for(&store, &lab, &name, &filter).map_err(|e| match e {
        HistoryError::Store(e) => CliError::from(e),
        unknown @ HistoryError::UnknownRunbook { .. } => CliError::bad_input(unknown),
    })?;
    Ok(match args.format {
        HistoryFormat::Table => report::render_history_table(&history),
        HistoryFormat::Json => report::render_history_json(&history),
        HistoryFormat::Html => report::render_history_html(&history),
    })
}
