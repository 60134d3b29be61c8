//! The USB hubs of a lab host as `uhubctl -f` lists them, and which port each of the
//! lab's phones is on, found by its USB serial (docs/platforms.md, "Tethering").

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::collect::hubs::uhubctl::{self, Block, Hub, Listing, Port, Switching};
use crate::config::{DeviceSpec, Lab, TetherSpec};
use crate::tether::{AutoPortError, AutoPortWhy, HubsError, PlaceError};
use crate::transport::{CommandSpec, Hosts, Transport};

/// What uhubctl prints on stderr when the host has no hub it can drive.
const NO_HUBS: &str = "No compatible devices detected";

/// One host's hubs, or why they could not be read.
#[derive(Debug, Serialize)]
pub struct HostHubs {
    pub host: String,
    /// `Ok` with no hubs: uhubctl found none on this host.
    #[serde(serialize_with = "listing_or_error")]
    pub listing: Result<Listing, HubsError>,
    /// The lab's phones on this host, each with where it was found (or why not).
    pub devices: Vec<DevicePort>,
}

fn listing_or_error<S: serde::Serializer>(r: &Result<Listing, HubsError>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(1))?;
    match r {
        Ok(l) => m.serialize_entry("hubs", &l.hubs)?,
        Err(e) => m.serialize_entry("error", &e.to_string())?,
    }
    m.end()
}

/// Where a lab device is attached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevicePort {
    pub device: String,
    /// The USB serial it was looked for by.
    pub serial: String,
    /// `Ok((location, port))`, or why it cannot be switched there.
    #[serde(serialize_with = "found_or_problem")]
    pub found: Result<(String, u32), PlaceError>,
}

fn found_or_problem<S: serde::Serializer>(r: &Result<(String, u32), PlaceError>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(None)?;
    match r {
        Ok((location, port)) => {
            m.serialize_entry("location", location)?;
            m.serialize_entry("port", port)?;
        }
        Err(e) => m.serialize_entry("problem", &e.to_string())?,
    }
    m.end()
}

/// The serials a device shows on USB: an Android phone's `adb` serial (unless it is an
/// `IP:PORT` of Wi-Fi adb), an iPhone's UDID as written and without its dash (the USB
/// `iSerial` of newer iPhones).
pub fn usb_serials(spec: &DeviceSpec) -> Vec<String> {
    if let Some(a) = spec.android() {
        return android_usb_serials(&a.serial);
    }
    if let Some(s) = spec.sim().and_then(|s| s.usb_serial.clone()) {
        return vec![s];
    }
    if let Some(i) = spec.ios() {
        return iphone_usb_serials(&i.udid);
    }
    Vec::new()
}

/// An adb serial as a USB serial: itself, unless it is Wi-Fi adb's `IP:PORT`.
pub fn android_usb_serials(serial: &str) -> Vec<String> {
    if serial.contains(':') { Vec::new() } else { vec![serial.to_string()] }
}

/// An iPhone's UDID as written and without its dash.
pub fn iphone_usb_serials(udid: &str) -> Vec<String> {
    let bare = udid.replace('-', "");
    if bare == udid { vec![bare] } else { vec![udid.to_string(), bare] }
}

/// Reads the host's hubs: `uhubctl -f` (every hub, also those that cannot switch per port,
/// so that a phone on one is named rather than missed).
pub async fn read(transport: &dyn Transport) -> Result<Listing, HubsError> {
    read_within(transport, Duration::from_secs(30)).await
}

/// `read`, with `limit` on the call.
pub async fn read_within(transport: &dyn Transport, limit: Duration) -> Result<Listing, HubsError> {
    let mut cmd = CommandSpec::new("uhubctl", &["-f"]);
    cmd.timeout = limit;
    let out = transport.exec(&cmd).await?;
    let stderr = out.stderr_text();
    if !out.success() {
        if stderr.contains(NO_HUBS) {
            return Ok(Listing::default());
        }
        let said = stderr.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("(nothing on stderr)");
        return Err(HubsError::Exited { status: out.status, said: said.into() });
    }
    uhubctl::parse(&out.stdout_text()).map_err(HubsError::Unreadable)
}

/// The port the device with one of `serials` is on, if it can be switched there.
pub fn locate(listing: &Listing, serials: &[String]) -> Result<(String, u32), PlaceError> {
    let mut found: Vec<(&Hub, &Port)> = serials.iter().flat_map(|s| listing.find_serial(s)).collect();
    found.dedup_by(|a, b| a.0.location == b.0.location && a.1.number == b.1.number);
    let (hub, port) = match found.as_slice() {
        [] => {
            return Err(PlaceError::OnNoPort {
                serial: serials.first().cloned(),
                hubs: listing.hubs.iter().filter(|h| h.block == Block::Current).count(),
            });
        }
        [one] => *one,
        more => {
            let at: Vec<String> = more.iter().map(|(h, p)| format!("{} port {}", h.location, p.number)).collect();
            return Err(PlaceError::SeveralPorts { at });
        }
    };
    match hub.device.switching {
        Some(Switching::Ppps) | None => Ok((hub.location.clone(), port.number)),
        Some(switching @ (Switching::Ganged | Switching::Nops)) => {
            Err(PlaceError::NotPerPort { location: hub.location.clone(), port: port.number, switching })
        }
    }
}

/// Gives every device of `names` whose tether is `{ uhubctl = "auto" }` the hub port its
/// USB serial is on (one `uhubctl -f` per host); returns (device, location, port) for each,
/// or the first device that cannot be placed, with why and the fix.
pub async fn resolve_auto(
    lab: &mut Lab,
    names: &[String],
    hosts: &Hosts,
) -> Result<Vec<(String, String, u32)>, AutoPortError> {
    let mut listings: BTreeMap<String, Listing> = BTreeMap::new();
    let mut out = Vec::new();
    for d in lab.devices.iter_mut().filter(|d| d.tether == TetherSpec::UhubctlAuto && names.contains(&d.name)) {
        let fail = |why: AutoPortWhy| AutoPortError { device: d.name.clone(), why };
        if !listings.contains_key(&d.host) {
            let t = hosts.get(&d.host).ok_or_else(|| fail(AutoPortWhy::UnknownHost(d.host.clone())))?;
            let l =
                read(t.as_ref()).await.map_err(|source| fail(AutoPortWhy::Hubs { host: d.host.clone(), source }))?;
            listings.insert(d.host.clone(), l);
        }
        let serials = usb_serials(d);
        if serials.is_empty() {
            return Err(fail(AutoPortWhy::NoSerial));
        }
        let (location, port) = locate(&listings[&d.host], &serials).map_err(|e| fail(AutoPortWhy::Place(e)))?;
        d.tether = TetherSpec::Uhubctl { location: location.clone(), port, repeat: None };
        out.push((d.name.clone(), location, port));
    }
    Ok(out)
}

/// Each of `devices`' place on `listing`.
pub fn map_devices(listing: &Listing, devices: &[&DeviceSpec]) -> Vec<DevicePort> {
    devices
        .iter()
        .map(|d| {
            let serials = usb_serials(d);
            DevicePort {
                device: d.name.clone(),
                serial: serials.first().cloned().unwrap_or_default(),
                found: locate(listing, &serials),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "Current status for hub 1-1 [2109:2817 VIA Labs, Inc. USB2.0 Hub, USB 2.10, 4 ports, ppps]\n  \
        Port 1: 0503 power highspeed enable connect [18d1:4ee7 Google Pixel 7 28031FDH2000ZV]\n  \
        Port 2: 0100 power\n\
        Current status for hub 3-4 [1a40:0101 USB 2.0 Hub, USB 2.00, 4 ports, ganged]\n  \
        Port 3: 0503 power highspeed enable connect [05ac:12a8 Apple Inc. iPhone 00008020001A2B3C4D5E6F7A]\n";

    #[test]
    fn a_phone_is_found_by_its_serial_and_refused_on_a_ganged_hub() {
        let l = uhubctl::parse(LISTING).unwrap();
        assert_eq!(locate(&l, &["28031FDH2000ZV".into()]), Ok(("1-1".into(), 1)));
        let ganged = locate(&l, &["00008020-001A2B3C4D5E6F7A".into(), "00008020001A2B3C4D5E6F7A".into()])
            .unwrap_err()
            .to_string();
        assert!(
            ganged.starts_with("it is on hub 3-4 port 3, whose hub switches all its ports together (ganged)"),
            "{ganged}"
        );
        let missing = locate(&l, &["0A1B2C3D".into()]).unwrap_err().to_string();
        assert!(missing.starts_with("USB serial 0A1B2C3D is on no port of the 2 hub(s) uhubctl lists"), "{missing}");
    }
}
