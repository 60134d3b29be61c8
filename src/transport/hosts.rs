//! `Hosts`: one transport per lab host, shared by every device and tether on it.
//!
//! A campaign builds it once, so the devices of one SSH host share that host's
//! connection pool and `max_sessions` (docs/hosts.md), and several phones on one
//! shelf can share one adb server or one usbmuxd forward — the way probe-rs hands
//! its probes one shared context.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::api::Transport;
use super::factory::for_host;
use crate::config::Lab;

#[derive(Clone, Default)]
pub struct Hosts {
    by_name: BTreeMap<String, Arc<dyn Transport>>,
}

impl Hosts {
    /// One transport for every `[[host]]` of `lab`. Nothing connects yet: an SSH host is
    /// reached on its first use.
    pub fn for_lab(lab: &Lab) -> Hosts {
        Hosts { by_name: lab.hosts.iter().map(|h| (h.name.clone(), for_host(h))).collect() }
    }

    /// The transport of host `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Transport>> {
        self.by_name.get(name).cloned()
    }

    /// Puts `transport` in for host `name` (tests hand in scripted transports).
    pub fn insert(&mut self, name: &str, transport: Arc<dyn Transport>) {
        self.by_name.insert(name.to_string(), transport);
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}

impl std::fmt::Debug for Hosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_name.keys()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_device_of_a_host_gets_the_same_transport() {
        let lab = crate::config::parse_lab(
            "[lab]\nname = \"t\"\n[[host]]\nname = \"local\"\n",
            std::path::Path::new("lab.toml"),
        )
        .unwrap();
        let hosts = Hosts::for_lab(&lab);
        let (a, b) = (hosts.get("local").unwrap(), hosts.get("local").unwrap());
        assert!(Arc::ptr_eq(&a, &b));
        assert!(hosts.get("shelf-9").is_none());
    }
}
