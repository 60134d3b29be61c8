//! Which devices `lab care` looks after: those tethered to a hub port it can switch.

use std::sync::Arc;

use crate::clock::Clock;
use crate::config::{Lab, Platform, TetherSpec};
use crate::device::Device;
use crate::device::sim::SimDevice;
use crate::tether::{Tether, UhubctlTether};
use crate::transport::Hosts;

/// A phone and the hub port it charges from.
pub struct CareTarget {
    pub device: Arc<dyn Device>,
    pub tether: Box<dyn Tether>,
    /// `LOCATION:PORT`.
    pub port: String,
}

/// A device care leaves alone, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub device: String,
    pub why: String,
}

/// Opens `names` (every device of the lab when empty) whose tether is a uhubctl port
/// (`uhubctl = "auto"` must be resolved before: `tether::hubs::resolve_auto`). Simulated
/// phones run on `sim_clock` (one clock for all, so a care loop on virtual time moves
/// them together). The others are skipped, with why.
pub fn open_targets(lab: &Lab, hosts: &Hosts, names: &[String], sim_clock: &Clock) -> (Vec<CareTarget>, Vec<Skipped>) {
    let (mut targets, mut skipped) = (Vec::new(), Vec::new());
    let skip = |device: &str, why: String| Skipped { device: device.into(), why };
    for spec in lab.devices.iter().filter(|d| names.is_empty() || names.contains(&d.name)) {
        let TetherSpec::Uhubctl { location, port, repeat } = &spec.tether else {
            let why = match spec.tether {
                TetherSpec::UhubctlAuto => "its `uhubctl = \"auto\"` port was not found".to_string(),
                _ => format!("tether `{}` is not a hub port care can switch", spec.tether.label()),
            };
            skipped.push(skip(&spec.name, why));
            continue;
        };
        let Some(transport) = hosts.get(&spec.host) else {
            skipped.push(skip(&spec.name, format!("host `{}` has no transport", spec.host)));
            continue;
        };
        let device: Arc<dyn Device> = if spec.platform() == Platform::Sim {
            Arc::new(SimDevice::with_clock(spec.clone(), sim_clock.clone()))
        } else {
            match crate::device::open(spec, lab, hosts) {
                Ok(d) => d,
                Err(e) => {
                    skipped.push(skip(&spec.name, e.to_string()));
                    continue;
                }
            }
        };
        let tether = UhubctlTether::new(transport, location, *port, *repeat);
        targets.push(CareTarget { device, tether: Box::new(tether), port: format!("{location}:{port}") });
    }
    (targets, skipped)
}
