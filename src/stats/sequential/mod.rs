//! Sequential campaigns' decisions in one place (issue 34; docs/statistics.md,
//! "Sequential campaigns"): the group-sequential `boundaries`, the `levels` of a look,
//! a rule's `design` on a model (its looks, power, expected cost), and the decision on
//! one `pair` at its look, which the report and the runner's looks share.

mod boundaries;
mod design;
mod levels;
mod normal;
mod pair;

pub use boundaries::{
    Spending, crossing_probabilities, crossing_probabilities_with_drift, lan_demets_obf, obf_spending, obrien_fleming,
    spending_bounds,
};
pub use design::Design;
pub use levels::{LookLevels, SPENDING, decided, fractions, information};
pub use pair::{Looked, PairDecision, PairLook, Recorded, decide_pair};
