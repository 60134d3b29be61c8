//! Opens the instrument a `[[monitor]]` names, where it is.

use std::sync::Arc;
use std::time::Duration;

use super::otii::{OtiiMonitor, SessionSettings};
use super::{MonitorError, PowerMonitor};
use crate::config::{MonitorKind, MonitorSpec};
use crate::transport::{ForwardTarget, Transport};

/// Opens `spec`'s instrument for a campaign. `transport` reaches the monitor's host;
/// `remote`: that host is not this machine, so a network address there is reached through
/// the transport's forward. Every reply is bounded by `timeout`.
pub async fn open(
    spec: &MonitorSpec,
    transport: &Arc<dyn Transport>,
    remote: bool,
    timeout: Duration,
) -> Result<Box<dyn PowerMonitor>, MonitorError> {
    match &spec.kind {
        MonitorKind::Otii { address, device, .. } => {
            let settings = SessionSettings {
                voltage_v: spec.voltage_v,
                current_limit_a: spec.current_limit_a,
                device: device.clone(),
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
        MonitorKind::Monsoon { .. } => Err(MonitorError::Unsupported {
            monitor: spec.name.clone(),
            what: "measuring yet: the Monsoon backend is not in this build".into(),
        }),
        MonitorKind::Sim => Err(MonitorError::Failed {
            monitor: spec.name.clone(),
            detail: "a simulated monitor supplies only a simulated device".into(),
        }),
    }
}
