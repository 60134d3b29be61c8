//! Statistics: pure functions, each naming its formula and source.

mod adjust;
mod change_points;
mod compare;
mod e_divisive;
mod effect;
mod judge;
mod mann_whitney;
mod moments;
mod order;
mod outliers;
mod relative;
mod sample_size;
mod segment_test;
pub mod sequential;
mod student_t;
mod summary;
mod verdict;
mod welch;

pub use adjust::{benjamini_hochberg, holm};
pub use change_points::{ChangePoint, ChangePointError, ChangePointOptions, change_points};
pub use compare::{Comparison, compare};
pub use effect::hedges_g;
pub use judge::{ADVICE_POWER, Arm, DecisionRule, MetricDecision, MetricPair, judge, overall_verdict, verdict_of};
pub use mann_whitney::{EXACT_MAX_N, MannWhitney, MwuMethod, mann_whitney, min_attainable_p};
pub use moments::{mean, sample_variance};
pub use order::{MedianCi, median, median_ci};
pub use outliers::{MODIFIED_Z_LIMIT, modified_z_outliers};
pub use relative::{ChangeScale, RelativeChange, relative_change};
pub use sample_size::{rank_test_floor, trials_per_arm};
pub use segment_test::SegmentTest;
pub use student_t::{t_quantile, t_two_sided_p};
pub use summary::{SUMMARY_VERSION, Summary, summarize};
pub use verdict::{Direction, Verdict, decide, decide_significance};
pub use welch::{Welch, welch, welch_from_moments};
