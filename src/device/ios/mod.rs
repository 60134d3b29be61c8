//! iPhones through usbmuxd with the `idevice` crate (docs/platforms/ios.md).

mod apps;
mod capture;
mod device;
mod error;
mod installs;
mod listing;
mod mux;
mod mux_error;
mod phone;
mod sample_error;
mod samples;
mod tunnel;

pub use apps::{Launch, Launcher};
pub use device::{IosDevice, SYSDIAGNOSE_STEP};
pub use error::{IosError, Where};
pub use installs::{Installed, Installs};
pub use listing::{AttachedIphone, IphoneState, list_attached};
pub use mux::{Mux, Provider, SYSTEM_SOCKET};
pub use mux_error::MuxError;
pub use phone::{IDENTITY_KEYS, Phone, major, same_udid};
pub use sample_error::SampleError;
pub use samples::{Gathered, Packets, Sampler, Via};
