//! A campaign compared with another of its runbook, for `lab compare` and `lab rerun`:
//! the stored summaries of each (recomputed when missing or outdated), the comparison in
//! the format asked for, and its exit code.

use super::exit::{self, CliError};
use crate::plan::Plan;
use crate::report;
use crate::store::{CampaignRecord, Store, SummaryRow};

#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum CompareFormat {
    Table,
    Md,
    Json,
    // The verdicts as JUnit XML for CI servers (docs/ci.md); the exit code stays 5 on a regression.
    Junit,
}

/// A campaign as a comparison reads it: its record, its plan's head and its summaries.
struct Summarized {
    campaign: CampaignRecord,
    plan: Plan,
    rows: Vec<SummaryRow>,
}

/// The campaign's stored summaries; recomputed from its measurements (and stored, as
/// `lab report` does) when missing, outdated or taken while it ran.
fn summarized(store: &Store, id: &str) -> Result<Summarized, CliError> {
    if !store.summaries_current(id)? {
        let data = report::load(store, id)?;
        let rep = report::build_report(&data);
        store.put_summaries(id, &report::summary_rows(&rep, &data))?;
    }
    let (campaign, plan) = report::load_head(store, id)?;
    Ok(Summarized { campaign, plan, rows: store.summaries(id)? })
}

/// Campaign B against campaign A, each in its store (`lab rerun --on` puts the re-run in
/// another lab's).
pub fn compare(
    (a_store, before): (&Store, &str),
    (b_store, after): (&Store, &str),
    format: CompareFormat,
) -> Result<(String, u8), CliError> {
    let (a, b) = (summarized(a_store, before)?, summarized(b_store, after)?);
    if a.campaign.runbook_name != b.campaign.runbook_name {
        return Err(CliError::bad_input(format!(
            "campaign {} ran runbook `{}` and campaign {} ran `{}`; fix: compare two campaigns of one runbook \
(`lab status` lists campaigns with their runbooks)",
            before, a.campaign.runbook_name, after, b.campaign.runbook_name
        )));
    }
    if before == after && std::ptr::eq(a_store, b_store) {
        return Err(CliError::bad_input(format!(
            "campaign {} is compared with itself; fix: name an earlier and a later campaign of runbook `{}`",
            before, a.campaign.runbook_name
        )));
    }
    let cmp = report::compare_summaries((&a.campaign, &a.rows), (&b.campaign, &b.plan, &b.rows));
    let out = match format {
        CompareFormat::Table => report::render_compare_table(&cmp),
        CompareFormat::Md => report::render_compare_markdown(&cmp),
        CompareFormat::Json => report::render_compare_json(&cmp),
        CompareFormat::Junit => report::render_compare_junit(&cmp),
    };
    Ok((out, if cmp.regression() { exit::REGRESSION } else { exit::OK }))
}
