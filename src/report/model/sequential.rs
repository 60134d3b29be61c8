//! A sequential campaign's stop as the report shows it (`repeats = { min, max, stop =
//! "decided" }`, issue 34): the look, its information and its cost next to the fixed
//! design's. The decisions themselves are `stats::sequential`'s (docs/statistics.md,
//! "Sequential campaigns").

use serde::Serialize;

use crate::stats::sequential::PairLook;

/// Why a sequential variant stopped, or where it stands (report, `variant_decided`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SequentialStop {
    /// Looks at this pair so far (the verdict is the last one's) and at most.
    pub look: usize,
    pub max_looks: usize,
    /// The look at which it was first decided, if it was.
    pub decided_at: Option<usize>,
    /// Valid values of the variant and of its reference at this look, and the fraction.
    pub n_treatment: u32,
    pub n_reference: u32,
    pub t: f64,
    /// The variant's device-hours on this model (its own trials).
    pub device_hours: f64,
    /// The fixed design with the same α and the same power at twice the threshold, for
    /// the noisiest gating metric's CV: trials per arm, device-hours, and that power.
    pub fixed_trials: Option<u32>,
    pub fixed_device_hours: Option<f64>,
    pub power_at_twice_threshold: Option<f64>,
}

impl SequentialStop {
    /// `decided at look 3 of at most 10 (12 trials, 6.0 device-hours; the fixed design: 20
    /// trials, 10.0 device-hours)`.
    pub fn line(&self) -> String {
        let at = match self.decided_at {
            Some(k) => format!("decided at look {k} of at most {}", self.max_looks),
            None if self.look >= self.max_looks => format!("undecided after all {} looks", self.max_looks),
            None => format!("undecided at look {} of at most {}", self.look, self.max_looks),
        };
        let fixed = match (self.fixed_trials, self.fixed_device_hours) {
            (Some(n), Some(h)) => format!("; the fixed design: {n} trials, {h:.1} device-hours"),
            _ => String::new(),
        };
        format!("{at} ({} trials, {:.1} device-hours{fixed})", self.n_treatment, self.device_hours)
    }
}

impl SequentialStop {
    /// Where a pair stands at its look, with trials of `trial_hours` each.
    pub fn of(look: &PairLook, trial_hours: f64) -> SequentialStop {
        SequentialStop {
            look: look.look,
            max_looks: look.max_looks,
            decided_at: look.decided_at,
            n_treatment: look.n_treatment,
            n_reference: look.n_reference,
            t: look.t,
            device_hours: look.device_hours(trial_hours),
            fixed_trials: look.fixed.map(|f| f.1),
            fixed_device_hours: look.fixed_device_hours(trial_hours),
            power_at_twice_threshold: look.fixed.map(|f| f.0),
        }
    }
}
