//! Opening the backend of a `[[device]]`.

use std::sync::Arc;

use super::api::{Device, DeviceError};
use super::host::HostDevice;
use super::sim::SimDevice;
use crate::config::{DeviceSpec, HostKind, Lab, Platform};

/// The backend for `spec`. Platforms whose backend is not built yet say so plainly.
pub fn open(spec: &DeviceSpec, lab: &Lab) -> Result<Arc<dyn Device>, DeviceError> {
    match spec.platform {
        Platform::Sim => Ok(Arc::new(SimDevice::new(spec.clone())) as Arc<dyn Device>),
        Platform::Host => {
            let host = lab.host(&spec.host).ok_or_else(|| DeviceError::Failed {
                device: spec.name.clone(),
                what: "opening".into(),
                detail: format!("host `{}` is not in the lab", spec.host),
            })?;
            // Starting and stopping process trees, cgroups and the app's logs are written
            // for this machine; an SSH host reads /proc fine but cannot run trials yet.
            if host.kind != HostKind::Local {
                return Err(DeviceError::Unsupported {
                    device: spec.name.clone(),
                    what: format!(
                        "a host device on SSH host `{}` (host devices run on this machine for now; use host = \"local\")",
                        spec.host
                    ),
                });
            }
            Ok(Arc::new(HostDevice::new(
                spec.clone(),
                crate::transport::for_host(host),
                &lab.artifacts_dir.join("host-data"),
            )))
        }
        other => Err(DeviceError::Unsupported {
            device: spec.name.clone(),
            what: format!("platform `{other}` (this version of lab drives simulated and host devices only)"),
        }),
    }
}
