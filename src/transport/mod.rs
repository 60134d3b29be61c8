//! Transports: how the lab runs commands and moves files on a host.

mod api;
mod local;
mod local_process;

pub use api::*;
pub use local::LocalTransport;
pub use local_process::LocalProcess;
