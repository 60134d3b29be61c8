//! `lab compare A B`: campaign B against campaign A, same runbook.

use std::path::Path;

use super::args::{CompareArgs, CompareFormat};
use super::context;
use super::exit::{self, CliError};
use super::report_cmd::{existing_store, load};
use crate::report;

/// The comparison and its exit code: 5 when a gating metric of some variant is worse
/// in B than in A, else 0.
pub fn run(lab_arg: Option<&Path>, args: &CompareArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    let store = existing_store(&lab)?;
    let (a, b) = (load(&store, &args.before)?, load(&store, &args.after)?);
    if a.campaign.runbook_name != b.campaign.runbook_name {
        return Err(CliError::bad_input(format!(
            "campaign {} ran runbook `{}` and campaign {} ran `{}`; fix: compare two campaigns of one runbook \
(`lab status` lists campaigns with their runbooks)",
            args.before, a.campaign.runbook_name, args.after, b.campaign.runbook_name
        )));
    }
    if args.before == args.after {
        return Err(CliError::bad_input(format!(
            "campaign {} is compared with itself; fix: name an earlier and a later campaign of runbook `{}`",
            args.before, a.campaign.runbook_name
        )));
    }
    let cmp = report::compare_reports(&report::build_report(&a), &report::build_report(&b), &b.plan.statistics);
    let out = match args.format {
        CompareFormat::Table => report::render_compare_table(&cmp),
        CompareFormat::Md => report::render_compare_markdown(&cmp),
        CompareFormat::Json => report::render_compare_json(&cmp),
    };
    Ok((out, if cmp.regression() { exit::REGRESSION } else { exit::OK }))
}
