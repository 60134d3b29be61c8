//! Statistics: pure functions, each naming its formula and source.

mod moments;
mod order;
mod student_t;
mod summary;

pub use moments::{mean, sample_variance};
pub use order::median;
pub use student_t::t_quantile;
pub use summary::{Summary, summarize};
