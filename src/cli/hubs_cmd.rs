//! `lab hubs [--host H] [--json]`: every host's USB hubs and ports as uhubctl lists them,
//! and which port each of the lab's phones is on.

use std::fmt::Write as _;

use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::context;
use super::exit::{self, CliError};
use crate::collect::hubs::uhubctl::Block;
use crate::config::DeviceSpec;
use crate::tether::hubs::{self, HostHubs};
use crate::transport::Hosts;

#[derive(Debug, clap::Args)]
pub struct HubsArgs {
    /// Only this `[[host]]` of lab.toml.
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Print the hubs, ports and phones as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Tabled)]
struct Row {
    host: String,
    hub: String,
    switching: String,
    port: u32,
    power: &'static str,
    attached: String,
    #[tabled(rename = "lab device")]
    lab_device: String,
}

pub async fn run(lab_arg: Option<&std::path::Path>, args: &HubsArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    if let Some(h) = &args.host {
        context::check_host_arg(&lab, h)?;
    }
    let transports = Hosts::for_lab(&lab);
    let mut all = Vec::new();
    for host in lab.hosts.iter().filter(|h| args.host.as_ref().is_none_or(|x| x == &h.name)) {
        let Some(t) = transports.get(&host.name) else { continue };
        let listing = hubs::read(t.as_ref()).await;
        let phones: Vec<&DeviceSpec> =
            lab.devices.iter().filter(|d| d.host == host.name && !hubs::usb_serials(d).is_empty()).collect();
        let devices = match &listing {
            Ok(l) => hubs::map_devices(l, &phones),
            Err(_) => Vec::new(),
        };
        all.push(HostHubs { host: host.name.clone(), listing, devices });
    }
    let code = if all.iter().all(|h| h.listing.is_ok()) { exit::OK } else { exit::UNAVAILABLE };
    if args.json {
        return Ok((serde_json::to_string_pretty(&all).map_err(CliError::internal)?, code));
    }
    Ok((render(&all), code))
}

pub fn render(all: &[HostHubs]) -> String {
    let mut rows = Vec::new();
    let mut notes = String::new();
    for h in all {
        let listing = match &h.listing {
            Ok(l) => l,
            Err(e) => {
                let _ = writeln!(notes, "{}: {e}", h.host);
                continue;
            }
        };
        let current: Vec<_> = listing.hubs.iter().filter(|x| x.block == Block::Current).collect();
        if current.is_empty() {
            let _ = writeln!(notes, "{}: no USB hub that uhubctl can drive", h.host);
        }
        for hub in current {
            for p in &hub.ports {
                // The lab's phone whose serial is on this port, marked when it cannot be switched there.
                let here = |d: &&hubs::DevicePort| p.device.as_ref().is_some_and(|x| x.has_serial(&d.serial));
                let lab_device = h.devices.iter().find(here).map_or(String::new(), |d| match d.found {
                    Ok(_) => d.device.clone(),
                    Err(_) => format!("{} (cannot switch)", d.device),
                });
                rows.push(Row {
                    host: h.host.clone(),
                    hub: hub.location.clone(),
                    switching: hub.device.switching.map_or("?".into(), |s| format!("{s:?}").to_lowercase()),
                    port: p.number,
                    power: if p.powered { "on" } else { "off" },
                    attached: p.device.as_ref().map_or(String::new(), |d| format!("{} {}", d.vid_pid, d.name)),
                    lab_device,
                });
            }
        }
        for d in &h.devices {
            if let Err(e) = &d.found {
                let _ = writeln!(notes, "{} ({}): {e}", d.device, h.host);
            }
        }
    }
    let mut out =
        if rows.is_empty() { String::new() } else { Table::new(rows).with(Style::rounded()).to_string() + "\n" };
    out.push_str(&notes);
    out
}
