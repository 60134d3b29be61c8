//! Sequential campaigns' decisions in one place (issue 34; docs/statistics.md,
//! "Sequential campaigns"): the group-sequential `boundaries`, the `levels` of a look,
//! a rule's `design` on a model (its looks, power, expected cost), a design sized from a
//! power (`target`: its looks, most trials and futility bound; issue 48), the decision on
//! one `pair` at its look, which the report and the runner's looks share, and simulated
//! campaigns decided by that rule (`simulate`, for the benchmark and the error-rate tests).

mod boundaries;
mod design;
mod levels;
mod normal;
mod pair;
mod simulate;
mod target;

pub use boundaries::{
    Spending, crossing_probabilities, crossing_probabilities_with_drift, crossings_between, futility_bounds,
    lan_demets_obf, obf_spending, obrien_fleming, spending_bounds,
};
pub use design::Design;
pub use levels::{FUTILITY_SPENDING, Futility, LookLevels, SPENDING, decided, fractions, information};
pub use pair::{Looked, PairDecision, PairLook, Recorded, decide_pair};
pub use simulate::{Decider, GATING, Moves, Phone, campaign};
pub use target::{DEFAULT_LOOKS, MAX_LOOKS, Sizing, Target};
