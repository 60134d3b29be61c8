//! `ProbeError`: why `lab discover` could not tell whether a monitor is there.

use super::otii::OtiiError;
use crate::transport::{ForwardTargetError, TransportError};

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{address}: {source}")]
    Address { address: String, source: ForwardTargetError },
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error(transparent)]
    Otii(#[from] OtiiError),
    #[error("cannot list USB devices: {0}")]
    Usb(nusb::Error),
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}
