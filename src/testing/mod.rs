//! Fakes shipped in the library for tests, the way probe-rs ships `FakeProbe`: a
//! scripted transport (argv → reply, every call recorded) and a scripted device (each
//! call's behaviour queued). Built for the crate's own tests and, with the `testing`
//! feature, for integration tests and other crates.

#[cfg(test)]
mod crates_table;
#[cfg(test)]
pub(crate) mod fixture;
mod hub_output;
#[cfg(test)]
mod layers;
#[cfg(test)]
pub(crate) mod postgres;
#[cfg(test)]
mod readme_words;
mod scripted_device;
mod scripted_transport;

pub use hub_output::{answer_uhubctl_port, uhubctl_port_listing, uhubctl_switch_output};
pub use scripted_device::{Behaviour, Call, ScriptedDevice};
pub use scripted_transport::{Reply, ScriptedTransport};
