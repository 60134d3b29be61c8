//! Everything one treatment-vs-baseline comparison of one metric computes.

use serde::{Deserialize, Serialize};

use super::{MannWhitney, RelativeChange, Summary, Welch, hedges_g, mann_whitney, relative_change, welch};

/// Treatment against baseline for one metric: change, tests and effect size.
/// Each part is `None` where it does not exist (see the functions named).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub n_treatment: usize,
    pub n_baseline: usize,
    /// Relative change with its interval ([`relative_change`]).
    pub change: Option<RelativeChange>,
    /// Welch's t-test, the test the verdict uses ([`welch`]).
    pub welch: Option<Welch>,
    /// Mann–Whitney U, shown beside it as a check that needs no normality ([`mann_whitney`]).
    pub mann_whitney: Option<MannWhitney>,
    /// Hedges' g ([`hedges_g`]).
    pub hedges_g: Option<f64>,
}

/// Compares `treatment` with `baseline`, given their summaries at `confidence`.
pub fn compare(
    treatment: &[f64],
    t_summary: &Summary,
    baseline: &[f64],
    b_summary: &Summary,
    confidence: f64,
) -> Comparison {
    Comparison {
        n_treatment: treatment.len(),
        n_baseline: baseline.len(),
        change: relative_change(t_summary, b_summary, confidence),
        welch: welch(treatment, baseline),
        mann_whitney: mann_whitney(treatment, baseline),
        hedges_g: hedges_g(t_summary, b_summary),
    }
}
