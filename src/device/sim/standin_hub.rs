//! `[device.sim] standin_hub`: the simulated phone's USB port is a port of the stand-in
//! uhubctl (standins/uhubctl), which stands in for the hub hardware. What reaches the
//! phone — VBUS, the bus — is read from the stand-in at the port, not taken from what the
//! tether meant to do, so a port that keeps VBUS (`vbus_stays`) keeps the phone charging.

use std::sync::Arc;
use std::time::Duration;

use crate::device::DeviceError;
use crate::transport::{CommandSpec, Transport};

#[derive(Clone)]
pub struct StandinHub {
    /// The phone's host: the stand-in and its state are there, as the hub would be.
    pub transport: Arc<dyn Transport>,
    pub location: String,
    pub port: u32,
}

impl std::fmt::Debug for StandinHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StandinHub({} on {}:{})", self.transport.host(), self.location, self.port)
    }
}

impl StandinHub {
    /// (VBUS at the port, the phone on the bus), from `uhubctl --standin-vbus|--standin-bus`.
    pub async fn read(&self, device: &str) -> Result<(bool, bool), DeviceError> {
        Ok((self.ask(device, "--standin-vbus").await?, self.ask(device, "--standin-bus").await?))
    }

    async fn ask(&self, device: &str, what: &str) -> Result<bool, DeviceError> {
        let port = self.port.to_string();
        let mut cmd = CommandSpec::new("uhubctl", &[what, &self.location, &port]);
        cmd.timeout = Duration::from_secs(30);
        let fail = |detail: String| DeviceError::Failed {
            device: device.into(),
            what: "reading its port on the stand-in hub (standin_hub)".into(),
            detail,
        };
        let out = self.transport.exec(&cmd).await.map_err(|e| fail(e.to_string()))?;
        match (out.success(), out.stdout_text().trim()) {
            (true, "on") => Ok(true),
            (true, "off") => Ok(false),
            _ => Err(fail(format!(
                "`{}` exited {:?}: {}{}; fix: put the stand-in uhubctl (standins/uhubctl) on the host's PATH with UHUBCTL_STATE",
                cmd.display(),
                out.status,
                out.stdout_text().trim(),
                out.stderr_text().trim()
            ))),
        }
    }
}
