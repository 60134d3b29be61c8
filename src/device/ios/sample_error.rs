//! `SampleError`: why a sampling task (energy gauge, sysmontap, pcapd) ended early or never
//! started; its message goes into the attempt's notes.

use idevice::IdeviceError;

use super::phone::CALL;

#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error("{what}: {source}")]
    Call { what: String, source: IdeviceError },
    #[error("{what}: no answer within {} s", CALL.as_secs())]
    NoAnswer { what: String },
    #[error("{what}: no tunnel within {} s", CALL.as_secs())]
    NoTunnel { what: String },
    #[error("{what}: {step}: {source}")]
    Tunnel { what: String, step: &'static str, source: IdeviceError },
}
