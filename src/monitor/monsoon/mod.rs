//! A Monsoon HVPM or LVPM on USB (docs/platforms/monitors.md): the USB link behind a
//! trait (`usb`) with a real backend (`nusb_link`) and a scripted fake (`fake`, with its
//! own packet encoding from Monsoon's Python API, `fake_packet`), the
//! protocol as Monsoon's Python API speaks it (`protocol`), the EEPROM calibration
//! (`calibration`), the sample packets' decoding (`decode`), a measuring session
//! (`session`) and that session as the runner's `PowerMonitor` (`monsoon_monitor`).

mod calibration;
pub mod decode;
mod error;
// A test double: in lab's own tests, and for integration tests through the `testing`
// feature (lab's dev-dependency on itself), never in the release binary.
#[cfg(any(test, feature = "testing"))]
pub mod fake;
#[cfg(any(test, feature = "testing"))]
pub mod fake_packet;
mod monsoon_monitor;
mod nusb_link;
pub mod protocol;
mod session;
mod usb;

pub use calibration::Calibration;
pub use error::MonsoonError;
pub use monsoon_monitor::MonsoonMonitor;
pub use nusb_link::NusbLink;
pub use session::{Monsoon, MonsoonSettings, Passthrough};
pub use usb::{Setup, UsbError, UsbLink};

#[cfg(test)]
mod python_check;
#[cfg(test)]
mod tests;
