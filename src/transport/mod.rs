//! Transports: how the lab runs commands and moves files on a host.

mod api;
mod factory;
mod local;
mod ssh;

pub use api::*;
pub use factory::for_host;
pub use local::LocalTransport;
pub use ssh::{SshConfig, SshTransport, command_line, connect};
