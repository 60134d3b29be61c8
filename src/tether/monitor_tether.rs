//! `tether = "monitor"`: the power monitor that supplies the device switches its USB
//! passthrough off for the soak and back on after (a Monsoon, as ACTS and BatteryLab
//! untether): the phone's USB data and charging both go through the monitor.

use async_trait::async_trait;

use super::api::{Tether, TetherError};
use crate::device::Device;
use crate::measure::UntetherMode;
use crate::monitor::SharedMonitor;

pub struct MonitorTether {
    monitor: SharedMonitor,
}

impl MonitorTether {
    pub fn new(monitor: SharedMonitor) -> MonitorTether {
        MonitorTether { monitor }
    }

    async fn passthrough(&self, device: &dyn Device, on: bool) -> Result<(), TetherError> {
        let failed = |detail: String| TetherError::Command {
            device: device.name().into(),
            command: format!("USB passthrough {}", if on { "on" } else { "off" }),
            detail,
        };
        let mut slot = self.monitor.lock().await;
        let m = slot.as_mut().ok_or_else(|| failed("its power monitor is not open".into()))?;
        m.set_usb_passthrough(on).await.map_err(|e| failed(e.to_string()))?;
        drop(slot);
        Ok(device.usb_power_changed(on).await?)
    }
}

#[async_trait]
impl Tether for MonitorTether {
    fn label(&self) -> String {
        "monitor".into()
    }
    fn mode(&self) -> UntetherMode {
        UntetherMode::PowerCut
    }
    fn cut_question(&self) -> String {
        "did the power monitor's USB passthrough really switch off?".into()
    }
    async fn untether(&self, device: &dyn Device) -> Result<UntetherMode, TetherError> {
        self.passthrough(device, false).await?;
        Ok(UntetherMode::PowerCut)
    }
    async fn retether(&self, device: &dyn Device) -> Result<(), TetherError> {
        self.passthrough(device, true).await
    }
}
