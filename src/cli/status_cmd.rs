//! `lab status`: the lab's devices and campaigns, read from the store so it works
//! from another terminal while `lab run` is going.

use super::context;
use super::exit::CliError;
use super::lab_view::{collect, render};

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print the status as JSON (with --watch: one compact object per line).
    #[arg(long)]
    pub json: bool,
    /// Keep going: redraw whenever the store changes (checked once a second), until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
}

pub fn run(lab_arg: Option<&std::path::Path>, args: &StatusArgs) -> Result<String, CliError> {
    let lab = context::load_lab(lab_arg)?;
    let store = context::open_store_existing(&lab)?;
    let view = collect(&lab, store.as_ref())?;
    if args.json {
        return serde_json::to_string_pretty(&view).map_err(CliError::internal);
    }
    Ok(render(&view))
}
