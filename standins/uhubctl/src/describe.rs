//! uhubctl's words for what it sees, as uhubctl.c prints them: `get_device_description`
//! (`vid:pid vendor product serial, USB x.yz, N ports, ppps`) and `print_port_status`
//! (`  Port N: wPortStatus words [description]`), with wPortStatus built from the state the
//! way a hub reports it.

use crate::enumerated::{Enumerated, Listed};
use crate::state::{Hub, Speed, State, Switching};

// wPortStatus bits (USB 2.0 table 11-21, USB 3.0 table 10-10), as in uhubctl.c.
const CONNECTION: u16 = 0x0001;
const ENABLE: u16 = 0x0002;
const SUSPEND: u16 = 0x0004;
const OVERCURRENT: u16 = 0x0008;
const RESET: u16 = 0x0010;
pub const POWER: u16 = 0x0100;
const LOW_SPEED: u16 = 0x0200;
const HIGH_SPEED: u16 = 0x0400;
const TEST: u16 = 0x0800;
const INDICATOR: u16 = 0x1000;
const LINK_STATE: u16 = 0x01e0;
pub const SS_POWER: u16 = 0x0200;
const SS_SPEED: u16 = 0x1c00;
const LS_RX_DETECT: u16 = 0x00a0;
const LS_POLLING: u16 = 0x00e0;
const LINK_STATES: [&str; 12] = [
    "U0",
    "U1",
    "U2",
    "U3",
    "SS.Disabled",
    "Rx.Detect",
    "SS.Inactive",
    "Polling",
    "Recovery",
    "HotReset",
    "Compliance",
    "Loopback",
];

/// A string descriptor as `libusb_get_string_descriptor_ascii` gives it into uhubctl's
/// 64-byte buffers (non-ASCII as `?`, at most 63 bytes), then `rtrim`med.
fn descriptor(s: &str) -> String {
    let ascii: String = s.chars().map(|c| if c.is_ascii() { c } else { '?' }).take(63).collect();
    ascii.trim_end().to_string()
}

fn strings(id: &str, vendor: &str, product: &str, serial: &str, nodesc: bool) -> String {
    let mut out = id.to_ascii_lowercase();
    if !nodesc {
        for s in [vendor, product, serial].map(descriptor) {
            if !s.is_empty() {
                out.push(' ');
                out.push_str(&s);
            }
        }
    }
    out
}

/// A hub's description, as in `Current status for hub LOC [...]`.
pub fn hub(h: &Hub, nodesc: bool) -> String {
    let mode = match h.lpsm() {
        Switching::Ppps => "ppps",
        Switching::Ganged => "ganged",
        Switching::Nops => "nops",
    };
    let bcd = h.bcd();
    format!(
        "{}, USB {:x}.{:02x}, {} ports, {mode}",
        strings(&h.id, &h.vendor, &h.product, &h.serial, nodesc),
        bcd >> 8,
        bcd & 0xff,
        h.ports.len()
    )
}

/// What port `port` of hub `i` holds, described, if libusb listed it at the start (a
/// device, or a described hub); `None` when nothing was listed there.
pub fn attached(state: &State, seen: &Enumerated, i: usize, port: usize, nodesc: bool) -> Option<String> {
    let listed = seen.port(i, port);
    if listed == Listed::No {
        return None;
    }
    let (id, full) = match state.child(i, port) {
        Some(c) => (&state.hubs[c].id, hub(&state.hubs[c], nodesc)),
        None => {
            let d = state.hubs[i].ports[port - 1].device.as_ref()?;
            (&d.id, strings(&d.id, &d.vendor, &d.product, &d.serial, nodesc))
        }
    };
    // A stale entry does not open: no strings, no hub part, only the cached vid:pid.
    Some(if listed == Listed::Stale { id.to_ascii_lowercase() } else { full })
}

/// wPortStatus of port `port` of hub `i` now.
pub fn status(state: &State, seen: &Enumerated, i: usize, port: usize) -> u16 {
    let h = &state.hubs[i];
    let p = &h.ports[port - 1];
    let ss = h.super_speed();
    let child = state.child(i, port);
    if !p.powered {
        // A USB3 port keeps reporting its link state (Rx.Detect) when off (uhubctl issue 613).
        return if ss { LS_RX_DETECT } else { 0 };
    }
    if p.device.is_none() && child.is_none() {
        return if ss { SS_POWER | LS_RX_DETECT } else { POWER };
    }
    if seen.port(i, port) != Listed::Live {
        // Powered during this run: the device signals connect but is not reset and
        // enabled yet (uhubctl's `-a 1` on a ganged hub prints `0101 power connect []`).
        // The USB3 value (link training) is this model's guess.
        return if ss { SS_POWER | LS_POLLING | CONNECTION } else { POWER | CONNECTION };
    }
    if ss {
        return SS_POWER | ENABLE | CONNECTION; // 5 Gbps, U0
    }
    let speed = match child {
        Some(c) if state.hubs[c].bcd() >= 0x0200 => Speed::High,
        Some(_) => Speed::Full,
        None => p.device.as_ref().map(|d| d.speed).unwrap_or_default(),
    };
    let speed = match speed {
        Speed::Low => LOW_SPEED,
        Speed::Full => 0,
        Speed::High => HIGH_SPEED,
    };
    POWER | speed | ENABLE | CONNECTION
}

/// `print_port_status`'s words for a status, after the hex.
pub fn words(status: u16, super_speed: bool) -> String {
    let mut w: Vec<&str> = Vec::new();
    if !super_speed {
        if status == 0 {
            w.push("off");
        } else {
            let bits = [(POWER, "power"), (INDICATOR, "indicator"), (TEST, "test"), (HIGH_SPEED, "highspeed")];
            let more = [(LOW_SPEED, "lowspeed"), (SUSPEND, "suspend")];
            w.extend(bits.iter().chain(&more).filter(|(b, _)| status & b != 0).map(|(_, s)| *s));
        }
    } else if status & SS_POWER == 0 {
        w.push("off");
    } else {
        w.push("power");
        if status & SS_SPEED == 0 {
            w.push("5gbps");
        }
        w.push(LINK_STATES[usize::from((status & LINK_STATE) >> 5)]);
    }
    let tail = [(RESET, "reset"), (OVERCURRENT, "oc"), (ENABLE, "enable"), (CONNECTION, "connect")];
    w.extend(tail.iter().filter(|(b, _)| status & b != 0).map(|(_, s)| *s));
    w.join(" ")
}

/// One port's line: `  Port 4: 0503 power highspeed enable connect [DESC]`.
pub fn port_line(port: usize, status: u16, super_speed: bool, desc: Option<&str>) -> String {
    let mut line = format!("  Port {port}: {status:04x} {}", words(status, super_speed));
    if status & CONNECTION != 0 {
        line += &format!(" [{}]", desc.unwrap_or(""));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_words_are_uhubctls() {
        // Values from uhubctl outputs quoted in its issue tracker.
        let usb2 = |s| words(s, false);
        let usb3 = |s| words(s, true);
        assert_eq!(usb2(0x0000), "off");
        assert_eq!(usb2(0x0100), "power");
        assert_eq!(usb2(0x0103), "power enable connect");
        assert_eq!(usb2(0x0503), "power highspeed enable connect");
        assert_eq!(usb2(0x0507), "power highspeed suspend enable connect");
        assert_eq!(usb2(0x0101), "power connect");
        assert_eq!(usb3(0x02a0), "power 5gbps Rx.Detect");
        assert_eq!(usb3(0x0203), "power 5gbps U0 enable connect");
        assert_eq!(usb3(0x0243), "power 5gbps U2 enable connect");
        assert_eq!(usb3(0x00a0), "off");
        assert_eq!(usb3(0x06a0), "power Rx.Detect", "a speed field other than 5 Gbps prints no speed");
    }

    #[test]
    fn descriptor_strings_are_clipped_and_trimmed_as_libusb_and_uhubctl_do() {
        assert_eq!(strings("0BDA:5411", "Generic ", "", "", false), "0bda:5411 Generic");
        assert_eq!(strings("2c97:1015", "Ledger", "Nano S", "0001", true), "2c97:1015");
        assert_eq!(descriptor("Caf\u{e9}"), "Caf?");
        assert_eq!(descriptor(&"x".repeat(80)).len(), 63);
    }

    #[test]
    fn a_connected_port_always_has_brackets_even_when_nothing_was_listed() {
        assert_eq!(port_line(1, 0x0101, false, None), "  Port 1: 0101 power connect []");
        assert_eq!(port_line(2, 0x0100, false, Some("unused")), "  Port 2: 0100 power");
    }
}
