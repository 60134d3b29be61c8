//! Power monitors: instruments that supply a device in place of its battery and sample its
//! current (docs/platforms/monitors.md). The runner sees each as a `PowerMonitor`; one
//! folder per kind; what their samples give is computed in `collect::monitor`.

mod error;
pub mod monsoon;
mod open;
pub mod otii;
mod power_monitor;
pub mod probe;
mod probe_error;

pub use error::MonitorError;
pub use open::open;
pub use power_monitor::{PowerMonitor, SharedMonitor};
pub use probe_error::ProbeError;
