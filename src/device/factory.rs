//! Opening the backend of a `[[device]]`.

use std::sync::Arc;

use super::api::{Device, DeviceError};
use super::host::HostDevice;
use super::sim::SimDevice;
use crate::config::{DeviceSpec, HostKind, Lab, Platform};
use crate::transport::Hosts;

/// The backend for `spec`, on its host's shared transport from `hosts`. Platforms whose
/// backend is not built yet say so plainly.
pub fn open(spec: &DeviceSpec, lab: &Lab, hosts: &Hosts) -> Result<Arc<dyn Device>, DeviceError> {
    match spec.platform() {
        Platform::Sim => Ok(Arc::new(SimDevice::new(spec.clone())) as Arc<dyn Device>),
        Platform::Host => {
            let host = lab.host(&spec.host).ok_or_else(|| DeviceError::Failed {
                device: spec.name.clone(),
                what: "opening".into(),
                detail: format!("host `{}` is not in the lab", spec.host),
            })?;
            let transport = hosts.get(&host.name).ok_or_else(|| DeviceError::Failed {
                device: spec.name.clone(),
                what: "opening".into(),
                detail: format!("host `{}` has no transport", host.name),
            })?;
            if let HostKind::Ssh(_) = host.kind {
                return Ok(Arc::new(HostDevice::remote(spec.clone(), transport)));
            }
            Ok(Arc::new(HostDevice::new(spec.clone(), transport, &lab.artifacts_dir.join("host-data"))))
        }
        other => Err(DeviceError::Unsupported {
            device: spec.name.clone(),
            what: format!("platform `{other}` (this version of lab drives simulated and host devices only)"),
        }),
    }
}
