//! Transports: how the lab runs commands and moves files on a host.

mod api;
mod local;

pub use api::*;
pub use local::LocalTransport;
