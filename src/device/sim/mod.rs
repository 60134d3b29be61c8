//! The simulated phone: a closed-form battery, power and temperature model behind
//! the `Device` trait (docs/sim.md).

mod device;
mod dump;
mod log;
pub mod model;
mod monitor;
mod powerlog;
mod standin_hub;
mod state;
mod trial;

#[cfg(test)]
mod tests;

pub use device::SimDevice;
pub use dump::{DUMP_FILE, DumpHeader, render};
pub use log::{BatteryRecord, EventKind, LogEnd, LogEvent, Sample, TrialLog};
pub use monitor::{SimMonitor, WAKE_MW};
pub use powerlog::{POWERLOG_FILE, WALL_EPOCH_S};
pub use standin_hub::StandinHub;
pub use state::{HOME_SCREEN, SimState};
pub use trial::{SAMPLE_PERIOD, TrialPlan};
