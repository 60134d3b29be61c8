//! A runbook's history from the store: stale summaries recomputed first, then the rows,
//! findings and alerts handed to [`build_history`]. `lab history` and the schedule's
//! review (artifacts/_history/<runbook>.html) both call [`history_for`].

use std::collections::BTreeSet;

use crate::config::{Lab, load_runbook};
use crate::report::history::build_history::{History, HistoryFilter, build_history};
use crate::report::model::build_report::build_report;
use crate::report::model::summaries::summary_rows;
use crate::stats::ChangePointOptions;
use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no campaign of runbook `{name}` in the store (known: {}); fix: pass one of those names, or a runbook file", known_list(.known))]
    UnknownRunbook { name: String, known: Vec<String> },
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() { "none yet".into() } else { known.join(", ") }
}

/// The history of runbook `runbook_name`. Change points use `[schedule.changes]` of the
/// one schedule of `lab` running that runbook, else Otava's defaults.
pub fn history_for(
    store: &Store,
    lab: &Lab,
    runbook_name: &str,
    filter: &HistoryFilter,
) -> Result<History, HistoryError> {
    let known: BTreeSet<String> = store.runbook_names()?.into_iter().collect();
    if !known.contains(runbook_name) {
        return Err(HistoryError::UnknownRunbook { name: runbook_name.into(), known: known.into_iter().collect() });
    }
    let mut warnings = Vec::new();
    for id in store.stale_summaries(runbook_name)? {
        match recompute(store, &id) {
            Ok(()) => {}
            Err(e) => warnings.push(format!("campaign {id}: summaries not recomputed: {e}")),
        }
    }
    let rows = store.history_rows(runbook_name)?;
    let mut schedules: BTreeSet<String> = rows.iter().filter_map(|r| r.schedule.clone()).collect();
    let running: Vec<&crate::config::Schedule> = lab
        .schedules
        .iter()
        .filter(|s| {
            schedules.contains(&s.name) || load_runbook(&s.runbook, lab).is_ok_and(|rb| rb.name == runbook_name)
        })
        .collect();
    schedules.extend(running.iter().map(|s| s.name.clone()));
    let options = match running.as_slice() {
        [one] => one.changes,
        _ => ChangePointOptions::default(),
    };
    let (mut findings, mut alerts) = (Vec::new(), Vec::new());
    for s in &schedules {
        findings.extend(store.findings_of_schedule(s)?);
        alerts.extend(store.alerts_of_schedule(s)?);
    }
    let mut history = build_history(runbook_name, &rows, &findings, &alerts, &options, filter);
    history.warnings.extend(warnings);
    Ok(history)
}

/// A campaign's summaries from its measurements, as `lab report` writes them.
fn recompute(store: &Store, id: &str) -> Result<(), Box<dyn std::error::Error>> {
    let data = crate::report::model::input::load(store, id)?;
    let report = build_report(&data);
    store.put_summaries(id, &summary_rows(&report, &data))?;
    Ok(())
}
