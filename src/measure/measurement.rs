//! One number a trial produced.

use serde::{Deserialize, Serialize};

/// One number with its unit and where it came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Measurement {
    pub metric: String,
    pub value: f64,
    pub unit: String,
    /// "sim model", "batterystats pwi estimate", "/proc/<pid>/stat", ...
    pub source: String,
}

impl Measurement {
    pub fn new(metric: &str, value: f64, unit: &str, source: &str) -> Self {
        Measurement { metric: metric.into(), value, unit: unit.into(), source: source.into() }
    }
}
