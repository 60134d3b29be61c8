//! Transports: how the lab runs commands and moves files on a host.

mod api;
mod cgroup;
mod check;
mod factory;
mod forward;
mod forward_target;
mod hosts;
mod local;
mod local_forward;
mod local_process;
mod ssh;
mod ssh_forward;
mod ssh_output;
mod ssh_process;

pub use api::*;
pub use cgroup::end_cgroup;
pub use check::{HostCheck, ToolCheck, check_all, check_host};
pub use factory::{for_host, for_host_once};
pub use forward::Forward;
pub use forward_target::{ForwardTarget, ForwardTargetError};
pub use hosts::Hosts;
pub use local::LocalTransport;
pub use local_process::LocalProcess;
pub use ssh::{SshConfig, SshTransport, command_line, connect};
