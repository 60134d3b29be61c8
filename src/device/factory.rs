//! Opening the backend of a `[[device]]`.

use std::sync::Arc;

use super::api::{Device, DeviceError};
use super::host::HostDevice;
use super::sim::SimDevice;
use crate::config::{DeviceSpec, Lab, Platform};
use crate::transport::LocalTransport;

/// The backend for `spec`. Platforms whose backend is not built yet say so plainly.
pub fn open(spec: &DeviceSpec, lab: &Lab) -> Result<Arc<dyn Device>, DeviceError> {
    match spec.platform {
        Platform::Sim => Ok(Arc::new(SimDevice::new(spec.clone())) as Arc<dyn Device>),
        // Every host is this machine for now (SSH hosts are refused by the config).
        Platform::Host => Ok(Arc::new(HostDevice::new(
            spec.clone(),
            Arc::new(LocalTransport::new(&spec.host)),
            &lab.artifacts_dir.join("host-data"),
        ))),
        other => Err(DeviceError::Unsupported {
            device: spec.name.clone(),
            what: format!("platform `{other}` (this version of lab drives simulated and host devices only)"),
        }),
    }
}
