//! `lab compare A B`: campaign B against campaign A, same runbook.

use std::path::Path;

use super::comparison::{CompareFormat, compare};
use super::context::{self, existing_store};
use super::exit::CliError;

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Campaign A, the reference (e.g. last week's).
    pub before: String,
    /// Campaign B, compared with A (e.g. this week's).
    pub after: String,
    #[arg(long, value_enum, default_value = "table")]
    pub format: CompareFormat,
}

/// The comparison and its exit code: 5 when a gating metric of some variant is worse
/// in B than in A, else 0.
pub fn run(lab_arg: Option<&Path>, args: &CompareArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    let store = existing_store(&lab)?;
    compare((&store, &args.before), (&store, &args.after), args.format)
}
