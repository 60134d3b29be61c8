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
