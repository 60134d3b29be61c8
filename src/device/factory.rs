//! Opening the backend of a `[[device]]`.

use std::sync::Arc;

use super::android::AndroidDevice;
use super::api::{Device, DeviceError};
use super::host::HostDevice;
use super::ios::IosDevice;
use super::sim::{SimDevice, StandinHub};
use crate::config::{DeviceSpec, HostKind, Lab, Platform, TetherSpec};
use crate::transport::{Hosts, Transport};

/// The backend for `spec`, on its host's shared transport from `hosts`. Platforms whose
/// backend is not built yet say so plainly.
pub fn open(spec: &DeviceSpec, lab: &Lab, hosts: &Hosts) -> Result<Arc<dyn Device>, DeviceError> {
    match spec.platform() {
        Platform::Sim => Ok(match spec.sim().filter(|s| s.standin_hub) {
            Some(_) => Arc::new(SimDevice::on_standin_hub(spec.clone(), standin_hub(spec, lab, hosts)?)),
            None => Arc::new(SimDevice::new(spec.clone())) as Arc<dyn Device>,
        }),
        Platform::Android => Ok(Arc::new(AndroidDevice::new(spec.clone(), transport_of(spec, lab, hosts)?)?)),
        Platform::Host => {
            let transport = transport_of(spec, lab, hosts)?;
            let host = lab.host(&spec.host).ok_or_else(|| opening(spec, "is not in the lab"))?;
            if let HostKind::Ssh(_) = host.kind {
                return Ok(Arc::new(HostDevice::remote(spec.clone(), transport)));
            }
            Ok(Arc::new(HostDevice::new(spec.clone(), transport, &lab.artifacts_dir.join("host-data"))))
        }
        Platform::Ios => {
            let transport = transport_of(spec, lab, hosts)?;
            let host = lab.host(&spec.host).ok_or_else(|| opening(spec, "is not in the lab"))?;
            let remote = matches!(host.kind, HostKind::Ssh(_));
            Ok(Arc::new(IosDevice::new(spec.clone(), transport, remote, &lab.artifacts_dir)?))
        }
    }
}

/// `[device.sim] standin_hub`: the port of its (resolved) uhubctl tether, on its host.
fn standin_hub(spec: &DeviceSpec, lab: &Lab, hosts: &Hosts) -> Result<StandinHub, DeviceError> {
    let TetherSpec::Uhubctl { location, port, .. } = &spec.tether else {
        return Err(DeviceError::Failed {
            device: spec.name.clone(),
            what: "opening".into(),
            detail: format!(
                "standin_hub needs the port of a uhubctl tether, and its tether is `{}` (`\"auto\"` is resolved by `lab run`)",
                spec.tether.label()
            ),
        });
    };
    Ok(StandinHub { transport: transport_of(spec, lab, hosts)?, location: location.clone(), port: *port })
}

/// The shared transport of the device's host.
fn transport_of(spec: &DeviceSpec, lab: &Lab, hosts: &Hosts) -> Result<Arc<dyn Transport>, DeviceError> {
    lab.host(&spec.host).ok_or_else(|| opening(spec, "is not in the lab"))?;
    hosts.get(&spec.host).ok_or_else(|| opening(spec, "has no transport"))
}

fn opening(spec: &DeviceSpec, what: &str) -> DeviceError {
    DeviceError::Failed {
        device: spec.name.clone(),
        what: "opening".into(),
        detail: format!("host `{}` {what}", spec.host),
    }
}
