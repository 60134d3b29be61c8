//! `AppReportError`: why the endpoint refused an app's state report (answered with 400 and
//! the message, one line).

use super::app_report::CONTRACT_VERSION;

#[derive(Debug, thiserror::Error)]
pub enum AppReportError {
    #[error("not a state report: {0}")]
    NotAReport(serde_json::Error),
    #[error("contract version {0} is not known here; send \"v\": {CONTRACT_VERSION}")]
    UnknownVersion(u32),
    #[error("{key} {value} is outside 0–100 (a percentage, not a 0–1 fraction)")]
    NotAPercentage { key: &'static str, value: f64 },
}
