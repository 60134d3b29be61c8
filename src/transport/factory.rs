//! The transport of a `[[host]]`.

use std::sync::Arc;

use super::api::Transport;
use super::local::LocalTransport;
use super::ssh::{SshConfig, SshTransport};
use crate::config::{Host, HostKind};

pub fn for_host(host: &Host) -> Arc<dyn Transport> {
    match &host.kind {
        HostKind::Local => Arc::new(LocalTransport::new(&host.name)),
        HostKind::Ssh(s) => Arc::new(SshTransport::new(SshConfig::from_host(&host.name, s))),
    }
}

/// The transport of a `[[host]]` for a look that reports a dead host at once (`lab hosts
/// check`, `lab discover`): one SSH connection attempt, not the runner's retries.
pub fn for_host_once(host: &Host) -> Arc<dyn Transport> {
    match &host.kind {
        HostKind::Local => for_host(host),
        HostKind::Ssh(s) => {
            Arc::new(SshTransport::new(SshConfig { connect_attempts: 1, ..SshConfig::from_host(&host.name, s) }))
        }
    }
}
