//! `OtiiMonitor`: an Otii session as a `PowerMonitor`, reopened after a lost connection.

use async_trait::async_trait;
use serde_json::Value;

use super::{OtiiError, Session, SessionSettings};
use crate::collect::monitor::PowerTrace;
use crate::monitor::{MonitorError, PowerMonitor};
use crate::transport::Forward;

pub struct OtiiMonitor {
    name: String,
    /// Where this machine connects (through `forward` when the server is on a lab host).
    address: String,
    /// What people know it by: the monitor's `address` on its host.
    shown: String,
    settings: SessionSettings,
    session: Option<Session>,
    /// The licence the last session held: after a lost connection the server keeps it
    /// reserved to this user, so the next session returns it.
    licence: Option<i64>,
    identity: Value,
    _forward: Option<Forward>,
}

impl OtiiMonitor {
    /// Opens a session on the server at `address` (reached here), shown as `shown`.
    pub async fn open(
        name: &str,
        address: String,
        shown: String,
        settings: SessionSettings,
        forward: Option<Forward>,
    ) -> Result<OtiiMonitor, MonitorError> {
        let mut m = OtiiMonitor {
            name: name.into(),
            address,
            shown,
            settings,
            session: None,
            licence: None,
            identity: Value::Null,
            _forward: forward,
        };
        m.session().await?;
        Ok(m)
    }

    fn error(&self, source: OtiiError) -> MonitorError {
        MonitorError::Otii { monitor: self.name.clone(), source }
    }

    /// The open session, or a new one when the last was lost.
    async fn session(&mut self) -> Result<&mut Session, MonitorError> {
        if self.session.is_none() {
            let s = Session::open_adopting(&self.address, &self.settings, self.licence)
                .await
                .map_err(|e| self.error(self.shown_in(e)))?;
            self.licence = s.licence();
            self.identity = s.identity.clone();
            self.session = Some(s);
        }
        Ok(self.session.as_mut().expect("opened above"))
    }

    /// Through a forward, errors name the forward's local port: they should name the
    /// monitor's own address.
    fn shown_in(&self, e: OtiiError) -> OtiiError {
        if self.address == self.shown {
            return e;
        }
        match e {
            OtiiError::Unreachable { why, .. } => OtiiError::Unreachable { address: self.shown.clone(), why },
            OtiiError::Closed { during, .. } => OtiiError::Closed { address: self.shown.clone(), during },
            OtiiError::Timeout { cmd, seconds, .. } => OtiiError::Timeout { address: self.shown.clone(), cmd, seconds },
            OtiiError::NoLicence { .. } => OtiiError::NoLicence { address: self.shown.clone() },
            OtiiError::NoDevice { wanted, have, .. } => {
                OtiiError::NoDevice { address: self.shown.clone(), wanted, have }
            }
            OtiiError::NotSampling { seconds, .. } => OtiiError::NotSampling { address: self.shown.clone(), seconds },
            other => other,
        }
    }

    /// A call's result; a lost connection ends the session (the next call opens another).
    fn checked<T>(&mut self, r: Result<T, OtiiError>) -> Result<T, MonitorError> {
        r.map_err(|e| {
            if matches!(e, OtiiError::Closed { .. } | OtiiError::Timeout { .. }) {
                self.session = None;
            }
            self.error(self.shown_in(e))
        })
    }
}

#[async_trait]
impl PowerMonitor for OtiiMonitor {
    fn identity(&self) -> Value {
        let mut id = self.identity.clone();
        if let Some(o) = id.as_object_mut() {
            o.insert("server".into(), Value::String(self.shown.clone()));
        }
        id
    }

    fn label(&self) -> String {
        format!("{} (Otii at {})", self.name, self.shown)
    }

    async fn start(&mut self) -> Result<(), MonitorError> {
        let r = self.session().await?.start().await;
        self.checked(r)
    }

    async fn mark(&mut self, text: &str) -> Result<f64, MonitorError> {
        let r = self.session().await?.mark(text).await;
        self.checked(r)
    }

    async fn stop(&mut self) -> Result<PowerTrace, MonitorError> {
        let Some(s) = self.session.as_mut() else {
            return Err(
                self.error(OtiiError::Closed { address: self.shown.clone(), during: " during the recording".into() })
            );
        };
        let r = s.stop().await;
        self.checked(r)
    }

    async fn close(mut self: Box<Self>) -> Result<(), MonitorError> {
        let session = match self.session.take() {
            Some(s) => s,
            // Lost, still holding a licence: a new connection returns it.
            None if self.licence.is_some() => match self.session().await {
                Ok(_) => self.session.take().expect("opened above"),
                Err(e) => return Err(e),
            },
            None => return Ok(()),
        };
        let r = session.close().await;
        r.map_err(|e| self.error(self.shown_in(e)))
    }
}
