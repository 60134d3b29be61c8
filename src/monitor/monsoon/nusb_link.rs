//! `NusbLink`: a Monsoon on this machine's USB through `nusb`, found by its USB serial
//! number. Kept thin (no hardware here to test it on): it opens the device as Monsoon's
//! Python API does (pmapi.py `Connect`: interface 0 claimed, a kernel driver detached,
//! bulk IN on 0x81) and keeps several bulk reads queued so none of the 1 667 packets a
//! second waits for the next read to be submitted.

use std::time::Duration;

use nusb::transfer::{Bulk, ControlIn, ControlOut, ControlType, In, Recipient, TransferError};
use nusb::{Endpoint, Interface, MaybeFuture};

use super::protocol::{PRODUCT_ID, VENDOR_ID};
use super::{MonsoonError, Setup, UsbError, UsbLink};

/// pmapi.py's control transfer timeout.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);
const BULK_IN: u8 = 0x81;
/// Bulk reads kept submitted (each one packet).
const IN_FLIGHT: usize = 32;

pub struct NusbLink {
    interface: Interface,
    endpoint: Endpoint<Bulk, In>,
}

impl NusbLink {
    /// Opens the Monsoon whose USB serial number is `serial` (blocking).
    pub fn open(serial: &str) -> Result<NusbLink, MonsoonError> {
        let failed = |why: String| MonsoonError::Open { serial: serial.to_string(), why };
        let devices = nusb::list_devices().wait().map_err(|e| failed(format!("cannot list USB devices: {e}")))?;
        let monsoons: Vec<_> = devices.filter(|d| d.vendor_id() == VENDOR_ID && d.product_id() == PRODUCT_ID).collect();
        let Some(info) = monsoons.iter().find(|d| d.serial_number() == Some(serial)) else {
            let found: Vec<&str> = monsoons.iter().map(|d| d.serial_number().unwrap_or("(no serial)")).collect();
            return Err(MonsoonError::NotFound {
                serial: serial.to_string(),
                found: if found.is_empty() { "none".into() } else { found.join(", ") },
            });
        };
        let device = info.open().wait().map_err(|e| failed(e.to_string()))?;
        if device.active_configuration().is_err() {
            device.set_configuration(1).wait().map_err(|e| failed(format!("cannot configure it: {e}")))?;
        }
        let interface = device.detach_and_claim_interface(0).wait().map_err(|e| failed(e.to_string()))?;
        let mut endpoint =
            interface.endpoint::<Bulk, In>(BULK_IN).map_err(|e| failed(format!("no bulk endpoint 0x81: {e}")))?;
        for _ in 0..IN_FLIGHT {
            let buffer = endpoint.allocate(endpoint.max_packet_size());
            endpoint.submit(buffer);
        }
        Ok(NusbLink { interface, endpoint })
    }
}

fn usb_error(e: TransferError) -> UsbError {
    match e {
        TransferError::Disconnected => UsbError::Disconnected,
        TransferError::Cancelled => UsbError::Timeout,
        TransferError::Stall => UsbError::Stall,
        other => UsbError::Other(other.to_string()),
    }
}

/// `bmRequestType`'s type and recipient bits as nusb names them.
fn kind(request_type: u8) -> (ControlType, Recipient) {
    let control_type = match (request_type >> 5) & 3 {
        0 => ControlType::Standard,
        1 => ControlType::Class,
        _ => ControlType::Vendor,
    };
    let recipient = match request_type & 0x1F {
        0 => Recipient::Device,
        1 => Recipient::Interface,
        2 => Recipient::Endpoint,
        _ => Recipient::Other,
    };
    (control_type, recipient)
}

impl UsbLink for NusbLink {
    fn control_out(&mut self, setup: Setup, data: &[u8]) -> Result<(), UsbError> {
        let (control_type, recipient) = kind(setup.request_type);
        let Setup { request, value, index, .. } = setup;
        let out = ControlOut { control_type, recipient, request, value, index, data };
        self.interface.control_out(out, CONTROL_TIMEOUT).wait().map_err(usb_error)
    }

    fn control_in(&mut self, setup: Setup, len: u16) -> Result<Vec<u8>, UsbError> {
        let (control_type, recipient) = kind(setup.request_type);
        let Setup { request, value, index, .. } = setup;
        let ask = ControlIn { control_type, recipient, request, value, index, length: len };
        self.interface.control_in(ask, CONTROL_TIMEOUT).wait().map_err(usb_error)
    }

    fn bulk_in(&mut self, timeout: Duration) -> Result<Option<Vec<u8>>, UsbError> {
        let Some(done) = self.endpoint.wait_next_complete(timeout) else { return Ok(None) };
        let status = done.status;
        let mut buffer = done.buffer;
        let packet = buffer[..done.actual_len.min(buffer.len())].to_vec();
        // Back in the queue at once, whatever came.
        buffer.clear();
        buffer.set_requested_len(self.endpoint.max_packet_size());
        self.endpoint.submit(buffer);
        status.map_err(usb_error)?;
        Ok(Some(packet))
    }
}
