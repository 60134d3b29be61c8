//! `PowerMonitor`: what the runner asks of any power monitor, whatever the instrument.

use async_trait::async_trait;
use serde_json::Value;

use super::MonitorError;
use crate::collect::monitor::PowerTrace;

/// A device's monitor as its worker and its tether share it (`tether = "monitor"` switches
/// its USB passthrough): `None` until the worker opened it and after it closed it.
pub type SharedMonitor = std::sync::Arc<tokio::sync::Mutex<Option<Box<dyn PowerMonitor>>>>;

/// One instrument supplying one device, opened for a campaign: a recording spans each
/// measured window, with markers at its ends; the samples come back as a `PowerTrace`.
/// Every call is bounded by the caller (the runner's timeouts); `close` gives back what
/// the instrument lent (an Otii licence) and must be called on every exit path.
#[async_trait]
pub trait PowerMonitor: Send {
    /// What the instrument says it is (model, serial, firmware, calibration where it
    /// tells), for the manifest and the report.
    fn identity(&self) -> Value;

    /// How people name it: `otii-1 (Otii Arc at 127.0.0.1:1905)`.
    fn label(&self) -> String;

    /// Starts a recording with the device supplied.
    async fn start(&mut self) -> Result<(), MonitorError>;

    /// A marker in the recording, now: its time in seconds on the trace's clock.
    async fn mark(&mut self, text: &str) -> Result<f64, MonitorError>;

    /// Stops the recording and reads its samples back.
    async fn stop(&mut self) -> Result<PowerTrace, MonitorError>;

    /// Switches the device's USB data and charging path through the monitor on or off
    /// (`tether = "monitor"`); only instruments that have one.
    async fn set_usb_passthrough(&mut self, _on: bool) -> Result<(), MonitorError> {
        Err(MonitorError::Unsupported { monitor: self.label(), what: "switching USB passthrough".into() })
    }

    /// Ends the session: output off, whatever was reserved returned.
    async fn close(self: Box<Self>) -> Result<(), MonitorError>;
}
