//! The `Tether` trait: cutting and restoring USB power around the soak, beside the
//! device so that any strategy works with any platform.

use crate::config::StepWhen;
use crate::device::{Device, DeviceError};
use crate::measure::UntetherMode;
use crate::transport::TransportError;
use async_trait::async_trait;

#[derive(Debug, thiserror::Error)]
pub enum TetherError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("{device}: `{command}` failed: {detail}")]
    Command { device: String, command: String, detail: String },
    #[error("{device}: hub {hub} port {port}: {detail}")]
    Port { device: String, hub: String, port: u32, detail: String },
    /// An operator step of the tether that was not answered.
    #[error("{device}: {detail}")]
    Step { device: String, detail: String },
    #[error("{device} needs an operator ({instruction}) but nobody can answer: {detail}")]
    NoOperator { device: String, instruction: String, detail: String },
}

#[async_trait]
pub trait Tether: Send + Sync {
    fn label(&self) -> String;
    /// The mode this tether means to give (`untether` says what it really gave).
    fn mode(&self) -> UntetherMode;
    /// What an attempt whose phone charged through the cut asks about, naming what should
    /// have cut the power (`validate::soak_violations`).
    fn cut_question(&self) -> String {
        format!("did the {} tether really stop it charging?", self.label())
    }
    /// Cuts power; returns how (a software unplug may manage to suspend charging).
    /// Waits for a person (its calls are bounded by `timeouts.operator` on top of
    /// `timeouts.tether`).
    fn needs_operator(&self) -> bool {
        false
    }
    async fn untether(&self, device: &dyn Device) -> Result<UntetherMode, TetherError>;
    async fn retether(&self, device: &dyn Device) -> Result<(), TetherError>;
}

/// Someone at the bench who can unplug a cable and attest what no API can read.
#[async_trait]
pub trait Operator: Send + Sync {
    /// Asks the operator to do `instruction` on `device` (the step `step`, at `when`);
    /// returns once confirmed, fails when nobody answered in time.
    async fn confirm(&self, device: &str, step: &str, when: StepWhen, instruction: &str) -> Result<(), TetherError>;
}
