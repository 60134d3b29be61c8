//! A campaign's report as data: loaded from the store ([`input`]), summarised per variant
//! and metric with verdicts against the baseline ([`build_report`]), the rows the store keeps
//! ([`summaries`]), pooled across campaigns, the battery curves and the power monitor's bands.

pub(super) mod build_report;
pub(super) mod curves;
pub(super) mod input;
pub(super) mod pooled;
pub(super) mod power_bands;
pub(super) mod report;
pub(super) mod sequential;
pub(super) mod state_rows;
pub(super) mod summaries;
pub(super) mod verdicts;
