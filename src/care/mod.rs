//! Care between campaigns (docs/care.md): keeping each hub-powered phone between charge
//! limits by switching its port, and what its battery's wear readings say.

mod care_error;
mod event;
mod health;
mod keeper;
#[cfg(test)]
mod keeper_tests;
mod policy;
mod targets;

pub use care_error::CareError;
pub use event::CareEvent;
pub use health::{FULL_WARN_AFTER, HEALTH_FALL_WARN_PER_30D, HealthSummary, HealthWarning, Reading, summarize};
pub use keeper::{CareSummary, Keeper};
pub use policy::{Action, ChargeWindow, MIN_CHECK};
pub use targets::{CareTarget, Skipped, open_targets};
