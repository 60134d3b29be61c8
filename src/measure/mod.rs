//! What a trial measured: single numbers and series over time. The lowest layer of the
//! data path: `collect` makes these, `device` hands them over, `store` keeps them, `stats`
//! and `report` read them; it depends on nothing of the lab.

mod measurement;
mod metric_order;
mod metrics;
mod series;
mod untether;

pub use measurement::Measurement;
pub use metric_order::metric_order;
pub use metrics::{KNOWN_METRICS, RAIL_ENERGY_PREFIX, is_known_metric, rail_of};
pub use series::{BATTERY_PCT, MONITOR_POWER_MW, Series, SeriesDecodeError};
pub use untether::UntetherMode;
