//! Opens the instrument a `[[monitor]]` names, where it is.

use std::sync::Arc;
use std::time::Duration;

use super::monsoon::{Monsoon, MonsoonMonitor, MonsoonSettings, Passthrough, UsbLink};
use super::otii::{OtiiMonitor, SessionSettings};
use super::{MonitorError, PowerMonitor};
use crate::config::{MonitorKind, MonitorSpec, OtiiModel};
use crate::transport::{ForwardTarget, Transport};

/// Opens `spec`'s instrument for a campaign. `transport` reaches the monitor's host;
/// `remote`: that host is not this machine, so a network address there is reached through
/// the transport's forward. Every reply is bounded by `timeout`. `usb`: the link to a
/// Monsoon in place of this machine's USB (a scripted fake, in tests).
pub async fn open(
    spec: &MonitorSpec,
    transport: &Arc<dyn Transport>,
    remote: bool,
    timeout: Duration,
    usb: Option<Box<dyn UsbLink>>,
) -> Result<Box<dyn PowerMonitor>, MonitorError> {
    match &spec.kind {
        MonitorKind::Otii { address, device, model } => {
            let settings = SessionSettings {
                voltage_v: spec.voltage_v,
                current_limit_a: spec.current_limit_a,
                device: device.clone(),
                sample_rate_hz: matches!(model, OtiiModel::Ace).then_some(spec.sample_rate_hz),
                timeout,
            };
            let (here, forward) = if remote {
                let target: ForwardTarget = format!("tcp:{address}").parse().map_err(|e| MonitorError::Failed {
                    monitor: spec.name.clone(),
                    detail: format!("its address: {e}"),
                })?;
                let fwd = transport
                    .forward(0, &target)
                    .await
                    .map_err(|e| MonitorError::Host { monitor: spec.name.clone(), detail: e.to_string() })?;
                (fwd.local_addr().to_string(), Some(fwd))
            } else {
                (address.clone(), None)
            };
            let m = OtiiMonitor::open(&spec.name, here, address.clone(), settings, forward).await?;
            Ok(Box::new(m))
        }
        MonitorKind::Monsoon { model, serial } => {
            if remote {
                return Err(MonitorError::Failed {
                    monitor: spec.name.clone(),
                    detail: format!(
                        "a Monsoon is read over the USB of the machine `lab` runs on, and host `{}` is reached over SSH; fix: run `lab` on that host",
                        spec.host
                    ),
                });
            }
            // On except when `tether = "monitor"` switches it: the phone on USB for install and launch.
            let settings = MonsoonSettings {
                passthrough: Passthrough::On,
                ..MonsoonSettings::new(*model, spec.voltage_v, spec.current_limit_a)
            };
            let session = match usb {
                Some(link) => Monsoon::open(link, serial, &settings).await,
                None => Monsoon::open_usb(serial, &settings).await,
            };
            let fail = |e| MonitorError::Monsoon { monitor: spec.name.clone(), lost: false, source: e };
            Ok(Box::new(MonsoonMonitor::new(&spec.name, serial, spec.kind.label(), session.map_err(fail)?)))
        }
        MonitorKind::Sim => Err(MonitorError::Failed {
            monitor: spec.name.clone(),
            detail: "a simulated monitor supplies only a simulated device".into(),
        }),
    }
}
