//! `UsbLink`: the only thing in `monitor::monsoon` that touches USB, so the protocol,
//! the decoding and the session run the same on the instrument (`NusbLink`) and on the
//! scripted fake (`FakeMonsoon`).

use std::time::Duration;

/// One Monsoon's USB endpoints: vendor control transfers on endpoint 0 and its bulk IN
/// endpoint 0x81, one 64-byte sample packet at a time. Blocking: the session calls it
/// from its own threads, never from the async runtime's.
pub trait UsbLink: Send {
    /// A control OUT transfer with `data` (`bmRequestType` 0x40 for every Monsoon request).
    fn control_out(&mut self, setup: Setup, data: &[u8]) -> Result<(), UsbError>;

    /// A control IN transfer (`bmRequestType` 0xC0): up to `len` bytes.
    fn control_in(&mut self, setup: Setup, len: u16) -> Result<Vec<u8>, UsbError>;

    /// The next bulk IN packet, or `None` when none came within `timeout`.
    fn bulk_in(&mut self, timeout: Duration) -> Result<Option<Vec<u8>>, UsbError>;
}

/// A control transfer's SETUP fields but its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// `bmRequestType`: direction, type and recipient bits.
    pub request_type: u8,
    pub request: u8,
    pub value: u16,
    pub index: u16,
}

/// What a transfer can end in (nusb's `TransferError`, narrowed to what the session
/// tells apart).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsbError {
    #[error("the device left USB")]
    Disconnected,
    #[error("no answer within the transfer's timeout")]
    Timeout,
    /// The device refused the request (a command while sampling, an unknown one).
    #[error("the device stalled the request")]
    Stall,
    #[error("{0}")]
    Other(String),
}
