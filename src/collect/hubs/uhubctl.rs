//! `uhubctl`'s listing of USB hubs and their ports (uhubctl 2.x, github.com/mvp/uhubctl):
//!
//! ```text
//! Current status for hub 3-1 [0bda:5411 Generic 4-Port USB 2.0 Hub, USB 2.10, 4 ports, ppps]
//!   Port 1: 0503 power highspeed enable connect [0bda:5411 Generic 4-Port USB 2.0 Hub, USB 2.10, 4 ports, ppps]
//!   Port 2: 0100 power
//!   Port 4: 0000 off
//! Sent power off request
//! New status for hub 3-1 [...]
//! ```
//!
//! The format is that of uhubctl.c's `print_port_status` (the port's wPortStatus in hex,
//! then `off` or `power` and the other status words, and the attached device in brackets)
//! and `get_device_description` (`VID:PID`, then vendor, product and serial as the device
//! reports them, space-separated, then for a hub `, USB x.yz, N ports, ppps|ganged|nops`).
//! After switching, uhubctl prints `Sent power on|off request` and the hub again under
//! `New status for hub`: the state the lab reads to know the port really went off. Lines
//! that are neither (`Resetting hub...`) are skipped; a malformed header or port line is
//! an error naming the line.

use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::{excerpt, number, numbered};

/// How a hub switches its ports' power (`wHubCharacteristics`' logical power switching mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Switching {
    /// Per-port power switching: each port on its own.
    Ppps,
    /// All ports switch together.
    Ganged,
    /// No power switching.
    Nops,
}

/// Which block of uhubctl's output a hub's lines are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Block {
    /// `Current status for hub`: before any switching.
    Current,
    /// `New status for hub`: after `Sent power … request`.
    New,
}

/// A USB device as uhubctl describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsbDevice {
    /// `vid:pid`, four lowercase hex digits each.
    pub vid_pid: String,
    /// Vendor, product and serial as printed, space-separated (any may be missing).
    pub name: String,
    /// For a hub: its USB version (`2.10`), port count and switching mode.
    pub usb: Option<String>,
    pub ports: Option<u32>,
    pub switching: Option<Switching>,
}

impl UsbDevice {
    /// Whether `serial` is this device's: uhubctl prints the serial last, so it is the
    /// last word of the name (a device without a serial ends with its product's last word,
    /// which is why this matches a known serial rather than reading one).
    pub fn has_serial(&self, serial: &str) -> bool {
        !serial.is_empty() && self.name.split_whitespace().last() == Some(serial)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Port {
    pub number: u32,
    /// wPortStatus as printed.
    pub status: u16,
    /// The port has power (`power`; `off` when not).
    pub powered: bool,
    /// A device is attached (`connect`).
    pub connected: bool,
    /// Every status word as printed (`power highspeed enable connect`, `5gbps Rx.Detect`).
    pub words: Vec<String>,
    /// The attached device (`None` when nothing is, or uhubctl could not describe it: `[]`).
    pub device: Option<UsbDevice>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hub {
    /// uhubctl's location (`3-1.1`: bus 3, port 1, then port 1 of the hub there), for `-l`.
    pub location: String,
    pub block: Block,
    pub device: UsbDevice,
    pub ports: Vec<Port>,
}

impl Hub {
    pub fn port(&self, n: u32) -> Option<&Port> {
        self.ports.iter().find(|p| p.number == n)
    }
}

/// Every hub block of one uhubctl run, in output order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Listing {
    pub hubs: Vec<Hub>,
}

impl Listing {
    /// The last block for hub `location` (after switching, the `New status`).
    pub fn latest(&self, location: &str) -> Option<&Hub> {
        self.hubs.iter().rev().find(|h| h.location == location)
    }

    /// Port `port` of hub `location` as uhubctl printed it after switching (the last `New
    /// status` block for that hub); `None` when it printed none (a wrong location or port).
    pub fn after_switch(&self, location: &str, port: u32) -> Option<&Port> {
        self.hubs.iter().rev().find(|h| h.location == location && h.block == Block::New)?.port(port)
    }

    /// Port `port` of every hub in the current blocks: for `uhubctl -l LOC -p N` that is the
    /// hub and, for a USB 3 hub, its other half (uhubctl lists both unless `-e`) — one
    /// connector seen from both buses.
    pub fn connector(&self, port: u32) -> Vec<(&Hub, &Port)> {
        self.hubs.iter().filter(|h| h.block == Block::Current).filter_map(|h| Some((h, h.port(port)?))).collect()
    }

    /// Where the device with USB serial `serial` is attached, among the current blocks.
    pub fn find_serial(&self, serial: &str) -> Vec<(&Hub, &Port)> {
        self.hubs
            .iter()
            .filter(|h| h.block == Block::Current)
            .flat_map(|h| h.ports.iter().map(move |p| (h, p)))
            .filter(|(_, p)| p.device.as_ref().is_some_and(|d| d.has_serial(serial)))
            .collect()
    }
}

const CURRENT: &str = "Current status for hub ";
const NEW: &str = "New status for hub ";

pub fn parse(text: &str) -> Result<Listing, ParseError> {
    let mut out = Listing::default();
    for (n, line) in numbered(text) {
        let (block, rest) = if let Some(r) = line.strip_prefix(CURRENT) {
            (Block::Current, r)
        } else if let Some(r) = line.strip_prefix(NEW) {
            (Block::New, r)
        } else if let Some(port) = line.trim_start().strip_prefix("Port ") {
            let hub = out.hubs.last_mut().ok_or_else(|| ParseError::at(n, "a port line before any hub line"))?;
            hub.ports.push(port_line(n, port)?);
            continue;
        } else {
            continue;
        };
        let (location, desc) = rest.split_once(" [").ok_or_else(|| {
            ParseError::at(
                n,
                format!("hub line without `[description]`: `{}` (uhubctl older than 2.0?)", excerpt(line)),
            )
        })?;
        let desc = desc
            .strip_suffix(']')
            .ok_or_else(|| ParseError::at(n, format!("hub description not closed by `]`: `{}`", excerpt(line))))?;
        let device =
            description(n, desc)?.ok_or_else(|| ParseError::at(n, format!("hub {location} without a description")))?;
        out.hubs.push(Hub { location: location.to_string(), block, device, ports: Vec::new() });
    }
    Ok(out)
}

/// `N: XXXX word… [DESC]` (after `Port `).
fn port_line(n: usize, s: &str) -> Result<Port, ParseError> {
    let (num, rest) = s.split_once(": ").ok_or_else(|| ParseError::at(n, format!("port line `{}`", excerpt(s))))?;
    let number: u32 = number(n, "port number", num.trim())?;
    let (words, device) = match rest.find(" [") {
        Some(i) => {
            let d = rest[i + 2..]
                .strip_suffix(']')
                .ok_or_else(|| ParseError::at(n, format!("device description not closed by `]`: `{}`", excerpt(s))))?;
            (&rest[..i], description(n, d)?)
        }
        None => (rest, None),
    };
    let mut words = words.split_whitespace();
    let hex = words.next().unwrap_or("");
    let status = u16::from_str_radix(hex, 16)
        .ok()
        .filter(|_| hex.len() == 4)
        .ok_or_else(|| ParseError::at(n, format!("port {number}: status `{hex}` is not 4 hex digits")))?;
    let words: Vec<String> = words.map(str::to_string).collect();
    let has = |w: &str| words.iter().any(|x| x == w);
    let (powered, off) = (has("power"), has("off"));
    if powered == off {
        return Err(ParseError::at(
            n,
            format!("port {number}: neither `power` nor `off` (or both) in `{}`", excerpt(s)),
        ));
    }
    Ok(Port { number, status, powered, connected: has("connect"), device, words })
}

/// `VID:PID[ vendor][ product][ serial][, USB x.yz, N ports[, ppps|ganged|nops]]`; `None` for `[]`.
fn description(n: usize, d: &str) -> Result<Option<UsbDevice>, ParseError> {
    if d.trim().is_empty() {
        return Ok(None);
    }
    let (head, hub) = match d.split_once(", USB ") {
        Some((h, rest)) => (h, Some(rest)),
        None => (d, None),
    };
    let (vid_pid, name) = head.split_once(' ').unwrap_or((head, ""));
    let valid = vid_pid.len() == 9
        && vid_pid.as_bytes()[4] == b':'
        && vid_pid.chars().enumerate().all(|(i, c)| i == 4 || c.is_ascii_hexdigit());
    if !valid {
        return Err(ParseError::at(n, format!("`{}` does not start with VID:PID", excerpt(d))));
    }
    let mut device = UsbDevice {
        vid_pid: vid_pid.to_ascii_lowercase(),
        name: name.trim().to_string(),
        usb: None,
        ports: None,
        switching: None,
    };
    if let Some(rest) = hub {
        let mut parts = rest.split(", ");
        device.usb = parts.next().map(str::to_string);
        if let Some(p) = parts.next() {
            let count = p.strip_suffix(" ports").or_else(|| p.strip_suffix(" port")).unwrap_or(p);
            device.ports = Some(number(n, "hub port count", count)?);
        }
        device.switching = match parts.next() {
            Some("ppps") => Some(Switching::Ppps),
            Some("ganged") => Some(Switching::Ganged),
            Some("nops") => Some(Switching::Nops),
            Some(other) => return Err(ParseError::at(n, format!("unknown power switching mode `{other}`"))),
            None => None,
        };
    }
    Ok(Some(device))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usb3_port_line_and_an_empty_description() {
        let text = "Current status for hub 2-2 [0bda:0411 Generic USB3.2 Hub, USB 3.20, 4 ports, ppps]\n  \
                    Port 1: 02a0 power 5gbps Rx.Detect\n  Port 2: 0101 power connect []\n";
        let l = parse(text).unwrap();
        let h = &l.hubs[0];
        assert_eq!(
            (h.device.usb.as_deref(), h.device.ports, h.device.switching),
            (Some("3.20"), Some(4), Some(Switching::Ppps))
        );
        assert_eq!(h.ports[0].words, ["power", "5gbps", "Rx.Detect"]);
        assert_eq!((h.ports[0].status, h.ports[0].powered, h.ports[0].connected), (0x02a0, true, false));
        assert_eq!((h.ports[1].connected, h.ports[1].device.is_none()), (true, true));
    }

    #[test]
    fn after_switch_reads_the_last_new_block_and_connector_both_halves() {
        let hub2 = "2109:2822 VIA Labs, Inc. USB2.0 Hub, USB 2.10, 4 ports, ppps";
        let hub3 = "2109:0822 VIA Labs, Inc. USB3.1 Hub, USB 3.20, 4 ports, ppps";
        let text = format!(
            "Current status for hub 1-1 [{hub2}]\n  Port 2: 0503 power highspeed enable connect [18d1:4ee7 Google Pixel 7 PIX]\n\
             Sent power off request\nNew status for hub 1-1 [{hub2}]\n  Port 2: 0000 off\n\
             Current status for hub 2-1 [{hub3}]\n  Port 2: 02a0 power 5gbps Rx.Detect\n\
             Sent power off request\nNew status for hub 2-1 [{hub3}]\n  Port 2: 00a0 off\n"
        );
        let l = parse(&text).unwrap();
        let p = l.after_switch("1-1", 2).unwrap();
        assert_eq!((p.status, p.powered), (0x0000, false));
        assert_eq!(l.after_switch("2-1", 2).map(|p| p.status), Some(0x00a0));
        assert!(l.after_switch("1-1", 3).is_none() && l.after_switch("1-2", 2).is_none());
        let before: Vec<(&str, bool)> =
            l.connector(2).iter().map(|(h, p)| (h.location.as_str(), p.connected)).collect();
        assert_eq!(before, [("1-1", true), ("2-1", false)], "current blocks only, both halves");
        assert!(parse(&text.replace("New status", "Current status")).unwrap().after_switch("1-1", 2).is_none());
    }

    #[test]
    fn an_old_format_hub_without_a_switching_mode_is_read() {
        let l = parse("Current status for hub 2-1 [0451:8046, USB 3.00, 4 ports]\n  Port 1: 06a0 power Rx.Detect\n")
            .unwrap();
        assert_eq!((l.hubs[0].device.name.as_str(), l.hubs[0].device.switching), ("", None));
    }

    #[test]
    fn errors_name_the_line() {
        let e = |t: &str| parse(t).unwrap_err().to_string();
        assert_eq!(e("  Port 1: 0100 power\n"), "line 1: a port line before any hub line");
        assert!(e("Current status for hub 20-1, vendor 2109:2811, 4 ports\n").contains("uhubctl older than 2.0"));
        let hub = "Current status for hub 1-1 [0bda:5411 Hub, USB 2.10, 4 ports, ppps]\n";
        assert_eq!(e(&format!("{hub}  Port 2: 01 power\n")), "line 2: port 2: status `01` is not 4 hex digits");
        assert!(e(&format!("{hub}  Port 2: 0100 standby\n")).starts_with("line 2: port 2: neither `power` nor `off`"));
        assert!(e(&format!("{hub}  Port 2: 0103 power connect [zz:1 x]\n")).contains("does not start with VID:PID"));
        assert!(e("Current status for hub 1-1 [0bda:5411 Hub, USB 2.10, 4 ports, shared]\n").contains("`shared`"));
        // Every prefix of a real listing parses or fails cleanly.
        let real = include_str!("../../../tests/fixtures/hubs/uhubctl_listing_tplink_uh720.txt");
        for i in (0..real.len()).filter(|&i| real.is_char_boundary(i)) {
            let _ = parse(&real[..i]);
        }
    }
}
