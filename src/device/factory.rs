//! Opening the backend of a `[[device]]`.

use std::sync::Arc;

use super::api::{Device, DeviceError};
use super::sim::SimDevice;
use crate::config::{DeviceSpec, Lab, Platform};

/// The backend for `spec`. Platforms whose backend is not built yet say so plainly.
pub fn open(spec: &DeviceSpec, _lab: &Lab) -> Result<Arc<dyn Device>, DeviceError> {
    match spec.platform {
        Platform::Sim => Ok(Arc::new(SimDevice::new(spec.clone())) as Arc<dyn Device>),
        other => Err(DeviceError::Unsupported {
            device: spec.name.clone(),
            what: format!("platform `{other}` (this version of lab drives simulated devices only)"),
        }),
    }
}
