//! The latest state report of each trial token, per moment (`launch`, `end`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::app_report::{AppReport, ReportAt};

/// Written by the server, read by the runner. The latest report wins: an app that
/// reports twice at the end corrected itself.
#[derive(Debug, Default)]
pub struct ReportBoard {
    inner: Mutex<HashMap<(String, ReportAt), AppReport>>,
}

impl ReportBoard {
    pub fn put(&self, token: &str, report: AppReport) {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).insert((token.to_string(), report.at), report);
    }

    pub fn get(&self, token: &str, at: ReportAt) -> Option<AppReport> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).get(&(token.to_string(), at)).cloned()
    }

    /// Drops `token`'s reports (its trial is over).
    pub fn forget(&self, token: &str) {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).retain(|(t, _), _| t != token);
    }
}
