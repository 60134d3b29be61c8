//! The `host` backend: a Linux machine whose app is a command, measured from the
//! kernel's own accounting (docs/host.md).

mod device;
pub mod sysfs;
#[cfg(test)]
pub(crate) mod tests;
pub mod tree;
pub mod usage;

pub use device::HostDevice;
