//! Tethering: how a device is cut from USB power for the soak and given it back.

mod api;
pub mod hubs;
mod strategies;
mod uhubctl;

pub use api::*;
pub use strategies::*;
pub use uhubctl::{BusWait, UhubctlTether};
