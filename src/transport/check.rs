//! `lab hosts check`: can the lab reach each host, log in, trust its key, and find
//! the tools its devices need?

use std::time::{Duration, Instant};

use serde::Serialize;

use super::api::{CommandSpec, TransportError};
use super::factory::for_host_once;
use crate::config::{Host, HostKind, Lab, Platform, TetherSpec, UsbmuxdAddress};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolCheck {
    pub tool: String,
    /// Which device needs it.
    pub for_device: String,
    pub found: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HostCheck {
    pub host: String,
    pub address: String,
    pub reachable: bool,
    pub login: bool,
    pub host_key: bool,
    /// Round trip of a no-op command, milliseconds.
    pub latency_ms: Option<f64>,
    pub tools: Vec<ToolCheck>,
    /// What went wrong, with the fix.
    pub problem: Option<String>,
}

impl HostCheck {
    pub fn ok(&self) -> bool {
        self.reachable && self.login && self.host_key && self.tools.iter().all(|t| t.found)
    }
}

/// What a device needs on its host: (tool, how to look for it).
fn needs(lab: &Lab, host: &str) -> Vec<(String, String, CommandSpec)> {
    let which = |tool: &str| {
        // The tool name travels as an argument, never inside the script.
        CommandSpec::new("sh", &["-c", "command -v \"$1\"", "sh", tool])
    };
    let mut out = Vec::new();
    for d in lab.devices.iter().filter(|d| d.host == host) {
        match d.platform() {
            Platform::Android => out.push(("adb".into(), d.name.clone(), which("adb"))),
            // A TCP address for usbmuxd is a forward: no socket to look for on the host.
            Platform::Ios => {
                let socket = match d.ios().and_then(|i| i.usbmuxd.as_ref()) {
                    None => Some("/var/run/usbmuxd".to_string()),
                    Some(UsbmuxdAddress::Socket(path)) => Some(path.to_string_lossy().into_owned()),
                    Some(UsbmuxdAddress::Tcp { .. }) => None,
                };
                if let Some(socket) = socket {
                    out.push(("usbmuxd socket".into(), d.name.clone(), CommandSpec::new("test", &["-S", &socket])));
                }
            }
            Platform::Host | Platform::Sim => {}
        }
        if let TetherSpec::Uhubctl { .. } | TetherSpec::UhubctlAuto = d.tether {
            out.push(("uhubctl".into(), d.name.clone(), which("uhubctl")));
        }
    }
    out
}

pub async fn check_host(lab: &Lab, host: &Host) -> HostCheck {
    let address = match &host.kind {
        HostKind::Local => "this machine".to_string(),
        HostKind::Ssh(s) => format!("{}@{}", s.user, s.address),
    };
    // One connection attempt: a check reports a dead host within its connect timeout.
    let transport = for_host_once(host);
    let mut c = HostCheck {
        host: host.name.clone(),
        address,
        reachable: false,
        login: false,
        host_key: false,
        latency_ms: None,
        tools: Vec::new(),
        problem: None,
    };
    let mut noop = CommandSpec::new("true", &[]);
    noop.timeout = Duration::from_secs(30);
    // The first command connects (and checks key and login); the second measures a round trip.
    if let Err(e) = transport.exec(&noop).await {
        match &e {
            TransportError::HostKey { .. } => c.reachable = true,
            TransportError::Auth { .. } => {
                c.reachable = true;
                c.host_key = true;
            }
            _ => {}
        }
        c.problem = Some(e.to_string());
        return c;
    }
    (c.reachable, c.login, c.host_key) = (true, true, true);
    let t = Instant::now();
    if transport.exec(&noop).await.is_ok() {
        c.latency_ms = Some(t.elapsed().as_secs_f64() * 1000.0);
    }
    for (tool, device, cmd) in needs(lab, &host.name) {
        let found = matches!(transport.exec(&cmd).await, Ok(o) if o.success());
        c.tools.push(ToolCheck { tool, for_device: device, found });
    }
    let missing: Vec<String> =
        c.tools.iter().filter(|t| !t.found).map(|t| format!("{} (for {})", t.tool, t.for_device)).collect();
    if !missing.is_empty() {
        c.problem = Some(format!("missing on the host: {}; fix: install them there", missing.join(", ")));
    }
    c
}

/// Checks every host of the lab concurrently; results in lab order.
pub async fn check_all(lab: &Lab) -> Vec<HostCheck> {
    let mut set = tokio::task::JoinSet::new();
    for (i, h) in lab.hosts.iter().enumerate() {
        let (lab, h) = (lab.clone(), h.clone());
        set.spawn(async move { (i, check_host(&lab, &h).await) });
    }
    let mut out = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(r) = r {
            out.push(r);
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, c)| c).collect()
}
