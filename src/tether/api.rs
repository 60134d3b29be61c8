//! The `Tether` trait: cutting and restoring USB power around the soak, beside the
//! device so that any strategy works with any platform.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::device::{Device, DeviceError};
use crate::transport::TransportError;

#[derive(Debug, thiserror::Error)]
pub enum TetherError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("{device}: `{command}` failed: {detail}")]
    Command { device: String, command: String, detail: String },
    #[error("{device} needs an operator ({instruction}) but nobody can answer: {detail}")]
    NoOperator { device: String, instruction: String, detail: String },
}

/// How a trial was untethered, recorded with it: a software unplug only fakes the
/// unplugged state on Android, so such trials are labelled.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum UntetherMode {
    /// Never tethered.
    None,
    /// USB power really cut (hub port off, cable pulled by an operator).
    PowerCut,
    /// The device was told it is unplugged.
    SoftUntethered,
}

#[async_trait]
pub trait Tether: Send + Sync {
    fn label(&self) -> String;
    fn mode(&self) -> UntetherMode;
    async fn untether(&self, device: &dyn Device) -> Result<(), TetherError>;
    async fn retether(&self, device: &dyn Device) -> Result<(), TetherError>;
}

/// Someone at the bench who can unplug a cable and attest what no API can read.
#[async_trait]
pub trait Operator: Send + Sync {
    /// Asks the operator to do `instruction` on `device`; returns once confirmed.
    async fn confirm(&self, device: &str, instruction: &str) -> Result<(), TetherError>;
}
