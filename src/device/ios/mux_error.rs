//! `MuxError`: why usbmuxd could not be reached on a host.

use crate::transport::TransportError;

#[derive(Debug, thiserror::Error)]
pub enum MuxError {
    #[error("resolving {host} took longer than 10 s")]
    ResolveSlow { host: String },
    #[error("resolving {host}: {source}")]
    Resolve { host: String, source: std::io::Error },
    #[error("{host} has no address")]
    NoAddress { host: String },
    /// The forward to usbmuxd's socket or port on an SSH host.
    #[error("forwarding to it: {0}")]
    Forward(#[from] TransportError),
}
