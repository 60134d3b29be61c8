//! `LookError`: what kept `lab discover` from looking at one kind of thing on a host. Its
//! message is the note `lab discover` prints, with the fix where there is one.

use std::time::Duration;

use crate::device::android::AdbListError;
use crate::device::ios::{IosError, MuxError};
use crate::monitor::ProbeError;
use crate::tether::HubsError;

#[derive(Debug, thiserror::Error)]
pub enum LookError {
    /// A call that did not answer within the options' limit.
    #[error("{what} did not answer within {}", humantime::format_duration(*limit))]
    TimedOut { what: &'static str, limit: Duration },
    #[error(
        "uhubctl is not installed on {host}; fix: `apt-get install uhubctl` there to switch phones' USB power \
         (until then they get tether = \"manual\")"
    )]
    NoUhubctl { host: String },
    #[error("uhubctl: {0}")]
    Hubs(HubsError),
    #[error("Android phones not looked for: {0}")]
    Android(#[from] AdbListError),
    /// usbmuxd not reached: `MuxError`, or its time limit.
    #[error("iPhones not looked for: usbmuxd: {0}")]
    Usbmuxd(Box<LookError>),
    #[error("{0}")]
    Mux(#[from] MuxError),
    #[error("iPhones not looked for: {0}")]
    Iphones(#[from] IosError),
    #[error(transparent)]
    Probe(#[from] ProbeError),
}
