//! `CareError`: why care could not read, lease or switch one phone. The keeper reports
//! each as a `CareEvent` (its message) and goes on with the other phones.

use std::time::Duration;

use crate::device::DeviceError;
use crate::store::StoreError;
use crate::tether::TetherError;

#[derive(Debug, thiserror::Error)]
pub enum CareError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("{device}: no battery level in its state")]
    NoBatteryLevel { device: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Someone else holds the phone or waits for it: `by` names them (`Busy::describe`).
    #[error("{by}")]
    Busy { by: String },
    #[error("its lease could not be read: {0}")]
    Lease(StoreError),
    #[error(transparent)]
    Tether(#[from] TetherError),
    #[error("{device}: switching port {port} did not finish within {limit:?}")]
    SwitchTimedOut { device: String, port: String, limit: Duration },
}
