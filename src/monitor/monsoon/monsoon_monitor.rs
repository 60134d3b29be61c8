//! `MonsoonMonitor`: a Monsoon session as a `PowerMonitor`.

use async_trait::async_trait;
use serde_json::Value;

use super::{Monsoon, MonsoonError};
use crate::collect::monitor::PowerTrace;
use crate::monitor::{MonitorError, PowerMonitor};

pub struct MonsoonMonitor {
    name: String,
    serial: String,
    model: &'static str,
    session: Monsoon,
}

impl MonsoonMonitor {
    pub fn new(name: &str, serial: &str, model: &'static str, session: Monsoon) -> MonsoonMonitor {
        MonsoonMonitor { name: name.into(), serial: serial.into(), model, session }
    }

    fn error(&self, e: MonsoonError) -> MonitorError {
        let lost = matches!(e, MonsoonError::Lost { .. } | MonsoonError::Usb { .. });
        MonitorError::Monsoon { monitor: self.name.clone(), lost, source: e }
    }
}

#[async_trait]
impl PowerMonitor for MonsoonMonitor {
    fn identity(&self) -> Value {
        self.session.identity.clone()
    }

    fn label(&self) -> String {
        format!("{} ({} {})", self.name, self.model, self.serial)
    }

    async fn start(&mut self) -> Result<(), MonitorError> {
        let r = self.session.start().await;
        r.map_err(|e| self.error(e))
    }

    async fn mark(&mut self, text: &str) -> Result<f64, MonitorError> {
        let r = self.session.mark(text).await;
        r.map_err(|e| self.error(e))
    }

    async fn stop(&mut self) -> Result<PowerTrace, MonitorError> {
        let r = self.session.stop().await;
        r.map_err(|e| self.error(e))
    }

    async fn set_usb_passthrough(&mut self, on: bool) -> Result<(), MonitorError> {
        let r = self.session.set_passthrough(on).await;
        r.map_err(|e| self.error(e))
    }

    async fn close(self: Box<Self>) -> Result<(), MonitorError> {
        let (name, session) = (self.name, self.session);
        session.close().await.map_err(|e| MonitorError::Monsoon { monitor: name, lost: true, source: e })
    }
}
