//! Tethering: how a device is cut from USB power for the soak and given it back.

mod api;
pub mod hubs;
mod hubs_error;
mod monitor_tether;
mod strategies;
mod uhubctl;

pub use api::*;
pub use hubs_error::{AutoPortError, AutoPortWhy, HubsError, PlaceError};
pub use monitor_tether::MonitorTether;
pub use strategies::*;
pub use uhubctl::{BusWait, UhubctlTether};
