//! The described hubs: the JSON file `UHUBCTL_STATE` names (its shape is in main.rs), the
//! checks that keep it a possible USB tree, and what follows from it — which hubs are on the
//! bus, which ports a device is enumerated on, which connectors carry VBUS.

use serde::{Deserialize, Serialize};

/// uhubctl's `MAX_HUB_PORTS`: ports above it are never in its port mask.
pub const MAX_PORTS: usize = 15;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub hubs: Vec<Hub>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hub {
    /// uhubctl's location: the bus, then the port path (`3`, `3-1`, `3-1.4`).
    pub location: String,
    /// `vid:pid`, four hex digits each.
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub vendor: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub product: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub serial: String,
    /// bcdUSB as uhubctl prints it (`2.10`, `3.20`); from `3.00` on the hub is super speed.
    pub usb: String,
    pub switching: Switching,
    /// The other half of a USB2+USB3 hub (the same chip, the same connectors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin: Option<String>,
    pub ports: Vec<Port>,
}

/// wHubCharacteristics' logical power switching mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Switching {
    Ppps,
    Ganged,
    Nops,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Port {
    #[serde(default = "yes")]
    pub powered: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<Device>,
    /// Switching the port off drops its data lines but not VBUS: the device leaves the bus
    /// and still charges (the hubs uhubctl's README warns about).
    #[serde(default, skip_serializing_if = "no")]
    pub vbus_stays: bool,
    /// The kernel powers this port again (Linux < 6.0) unless one invocation sends it at
    /// least this many off requests (`-r N`); uhubctl's New status then shows it powered.
    #[serde(default = "one", skip_serializing_if = "at_most_one")]
    pub off_needs_repeat: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub vendor: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub product: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub serial: String,
    /// Its USB2 speed (a device on a super speed hub runs at 5 Gbps whatever this says).
    #[serde(default, skip_serializing_if = "Speed::is_high")]
    pub speed: Speed,
    /// Run with `usb` or `none` appended when the VBUS at this device changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_vbus: Vec<String>,
    /// Run with `attached` or `detached` appended when this device joins or leaves the bus.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_bus: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Speed {
    Low,
    Full,
    #[default]
    High,
}

impl Speed {
    fn is_high(&self) -> bool {
        *self == Speed::High
    }
}

fn yes() -> bool {
    true
}
fn no(b: &bool) -> bool {
    !*b
}
fn one() -> u32 {
    1
}
fn at_most_one(n: &u32) -> bool {
    *n <= 1
}

/// Recursion bound for the walks up the tree (USB allows 7 tiers; twins add a few hops).
const MAX_DEPTH: u32 = 32;

impl Hub {
    /// bcdUSB as a number (`2.10` → 0x0210).
    pub fn bcd(&self) -> u16 {
        parse_bcd(&self.usb).unwrap_or(0)
    }

    pub fn super_speed(&self) -> bool {
        self.bcd() >= 0x0300
    }

    /// The mode uhubctl reports: a one-port ganged hub is per-port (uhubctl.c does so too).
    pub fn lpsm(&self) -> Switching {
        match self.switching {
            Switching::Ganged if self.ports.len() == 1 => Switching::Ppps,
            s => s,
        }
    }

    /// How many port numbers follow the bus in the location (`3` → 0, `3-1.4` → 2).
    pub fn depth(&self) -> usize {
        match self.location.split_once('-') {
            Some((_, path)) => path.split('.').count(),
            None => 0,
        }
    }

    /// The location of whatever is plugged into `port`.
    pub fn child_location(&self, port: usize) -> String {
        if self.location.contains('-') {
            format!("{}.{port}", self.location)
        } else {
            format!("{}-{port}", self.location)
        }
    }
}

/// The hub location above `location` and the port it hangs from (`3-1.4` → `3-1`, 4).
pub fn parent_of(location: &str) -> Option<(String, usize)> {
    let (up, port) = match location.rsplit_once('.') {
        Some(split) => split,
        None => location.split_once('-')?,
    };
    Some((up.to_string(), port.parse().ok()?))
}

fn parse_bcd(text: &str) -> Option<u16> {
    let (major, minor) = text.split_once('.')?;
    let ok = |s: &str, max: usize| !s.is_empty() && s.len() <= max && s.chars().all(|c| c.is_ascii_hexdigit());
    if !ok(major, 2) || !ok(minor, 2) || minor.len() != 2 {
        return None;
    }
    Some((u16::from_str_radix(major, 16).ok()? << 8) | u16::from_str_radix(minor, 16).ok()?)
}

fn is_vid_pid(id: &str) -> bool {
    id.split_once(':')
        .is_some_and(|(v, p)| [v, p].iter().all(|h| h.len() == 4 && h.chars().all(|c| c.is_ascii_hexdigit())))
}

fn is_location(loc: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    match loc.split_once('-') {
        Some((bus, path)) => digits(bus) && path.split('.').all(digits),
        None => digits(loc),
    }
}

impl State {
    pub fn index(&self, location: &str) -> Option<usize> {
        self.hubs.iter().position(|h| h.location == location)
    }

    fn twin(&self, i: usize) -> Option<usize> {
        self.hubs[i].twin.as_deref().and_then(|t| self.index(t))
    }

    /// The hub whose port `port` (1-based) of hub `i` leads to, when it is described.
    pub fn child(&self, i: usize, port: usize) -> Option<usize> {
        self.index(&self.hubs[i].child_location(port))
    }

    fn parent(&self, i: usize) -> Option<(usize, usize)> {
        let (up, port) = parent_of(&self.hubs[i].location)?;
        Some((self.index(&up)?, port))
    }

    /// Hub `i` is on the bus: every described hub above it has its port powered.
    pub fn present(&self, i: usize) -> bool {
        self.present_at(i, 0)
    }

    fn present_at(&self, i: usize, depth: u32) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        match self.parent(i) {
            Some((p, port)) => self.present_at(p, depth + 1) && self.hubs[p].ports[port - 1].powered,
            None => true,
        }
    }

    /// Port `port` of hub `i` is on the bus with power: what it holds is enumerated.
    pub fn on_bus(&self, i: usize, port: usize) -> bool {
        self.present(i) && self.hubs[i].ports[port - 1].powered
    }

    /// The connector of port `port` of hub `i` carries VBUS: the hub has power from above
    /// (through either half), and this port, or the same port of its twin, is powered — or
    /// keeps VBUS when switched off.
    pub fn vbus(&self, i: usize, port: usize) -> bool {
        self.vbus_at(i, port, 0)
    }

    fn vbus_at(&self, i: usize, port: usize, depth: u32) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let p = &self.hubs[i].ports[port - 1];
        let twin_on = self.pair(i).is_some_and(|t| self.hubs[t].ports.get(port - 1).is_some_and(|q| q.powered));
        self.hub_powered(i, depth + 1) && (p.powered || p.vbus_stays || twin_on)
    }

    fn hub_powered(&self, i: usize, depth: u32) -> bool {
        let from_above = |h: usize| match self.parent(h) {
            Some((p, port)) => self.vbus_at(p, port, depth + 1),
            None => true,
        };
        from_above(i) || self.pair(i).is_some_and(from_above)
    }

    /// Whether this can be a USB tree uhubctl would see; the first problem otherwise.
    pub fn check(&self) -> Result<(), String> {
        for (i, h) in self.hubs.iter().enumerate() {
            let at = format!("hub {:?}", h.location);
            if !is_location(&h.location) {
                return Err(format!("{at}: not a location such as \"3\", \"3-1\" or \"3-1.4\""));
            }
            if self.index(&h.location) != Some(i) {
                return Err(format!("{at}: described twice"));
            }
            if !is_vid_pid(&h.id) {
                return Err(format!("{at}: id {:?} is not vid:pid (e.g. \"0bda:5411\")", h.id));
            }
            if parse_bcd(&h.usb).is_none() {
                return Err(format!("{at}: usb {:?} is not a version such as \"2.10\" or \"3.20\"", h.usb));
            }
            if h.ports.is_empty() || h.ports.len() > MAX_PORTS {
                return Err(format!("{at}: {} ports; a hub has 1 to {MAX_PORTS}", h.ports.len()));
            }
            if let Some((up, port)) = parent_of(&h.location)
                && self.index(&up).is_some_and(|p| port > self.hubs[p].ports.len())
            {
                return Err(format!("{at}: hub {up:?} has no port {port}"));
            }
            if let Some(t) = &h.twin {
                let Some(j) = self.index(t) else { return Err(format!("{at}: twin {t:?} is not described")) };
                let other = &self.hubs[j];
                if other.super_speed() == h.super_speed() {
                    return Err(format!("{at}: twin {t:?} must be the other half (one USB2, one USB 3.00 or later)"));
                }
            }
            for (n, p) in h.ports.iter().enumerate() {
                let at = format!("{at} port {}", n + 1);
                if h.switching == Switching::Nops && !p.powered {
                    return Err(format!("{at}: a nops hub cannot switch, so its ports are powered"));
                }
                if let Some(d) = &p.device {
                    if !is_vid_pid(&d.id) {
                        return Err(format!("{at}: device id {:?} is not vid:pid", d.id));
                    }
                    if self.child(i, n + 1).is_some() {
                        return Err(format!("{at}: holds both a device and hub {:?}", h.child_location(n + 1)));
                    }
                }
            }
        }
        // A twin named from one side only still pairs both ways.
        let mut partner: Vec<Option<usize>> = vec![None; self.hubs.len()];
        for i in 0..self.hubs.len() {
            let Some(j) = self.twin(i) else { continue };
            for (a, b) in [(i, j), (j, i)] {
                match partner[a] {
                    Some(other) if other != b => {
                        return Err(format!("hub {:?}: twin of two hubs", self.hubs[a].location));
                    }
                    _ => partner[a] = Some(b),
                }
            }
        }
        Ok(())
    }

    /// The twin of hub `i` whichever side names it.
    pub fn pair(&self, i: usize) -> Option<usize> {
        self.twin(i).or_else(|| self.hubs.iter().position(|h| h.twin.as_deref() == Some(&self.hubs[i].location)))
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    pub fn hub(location: &str, usb: &str, switching: Switching, ports: usize) -> Hub {
        Hub {
            location: location.into(),
            id: "0bda:5411".into(),
            vendor: "Generic".into(),
            product: "4-Port USB 2.0 Hub".into(),
            serial: String::new(),
            usb: usb.into(),
            switching,
            twin: None,
            ports: (0..ports).map(|_| port()).collect(),
        }
    }

    pub fn port() -> Port {
        Port { powered: true, device: None, vbus_stays: false, off_needs_repeat: 1 }
    }

    pub fn device(id: &str, vendor: &str, product: &str, serial: &str, speed: Speed) -> Device {
        Device {
            id: id.into(),
            vendor: vendor.into(),
            product: product.into(),
            serial: serial.into(),
            speed,
            on_vbus: vec![],
            on_bus: vec![],
        }
    }

    #[test]
    fn locations_walk_up_the_port_path() {
        assert_eq!(parent_of("3-1.4"), Some(("3-1".into(), 4)));
        assert_eq!(parent_of("3-1"), Some(("3".into(), 1)));
        assert_eq!(parent_of("3"), None);
        let h = hub("3", "2.00", Switching::Ppps, 2);
        assert_eq!((h.child_location(2), h.depth()), ("3-2".to_string(), 0));
        let h = hub("3-1.4", "2.00", Switching::Ppps, 2);
        assert_eq!((h.child_location(2), h.depth()), ("3-1.4.2".to_string(), 2));
        assert_eq!(
            (parse_bcd("2.10"), parse_bcd("3.20"), parse_bcd("3.2"), parse_bcd("x")),
            (Some(0x210), Some(0x320), None, None)
        );
    }

    #[test]
    fn a_child_hub_is_on_the_bus_only_while_its_parent_port_is_powered() {
        let mut s =
            State { hubs: vec![hub("1-1", "2.10", Switching::Ppps, 4), hub("1-1.2", "2.10", Switching::Ppps, 4)] };
        s.check().unwrap();
        assert!(s.present(1) && s.on_bus(1, 3) && s.vbus(1, 3));
        s.hubs[0].ports[1].powered = false;
        assert!(!s.present(1) && !s.on_bus(1, 3) && !s.vbus(1, 3), "a bus-powered child loses everything");
    }

    #[test]
    fn vbus_follows_either_half_of_a_twin_and_ports_that_keep_it() {
        let mut usb2 = hub("1-1", "2.10", Switching::Ppps, 4);
        usb2.twin = Some("2-1".into());
        let mut s = State { hubs: vec![usb2, hub("2-1", "3.20", Switching::Ppps, 4)] };
        s.check().unwrap();
        assert_eq!(s.pair(1), Some(0), "named from one side, paired both ways");
        s.hubs[0].ports[0].powered = false;
        assert!(!s.on_bus(0, 1) && s.vbus(0, 1), "the USB3 half still powers the connector (uhubctl -e)");
        s.hubs[1].ports[0].powered = false;
        assert!(!s.vbus(0, 1));
        s.hubs[0].ports[0].vbus_stays = true;
        assert!(!s.on_bus(0, 1) && s.vbus(0, 1));
    }

    #[test]
    fn impossible_trees_are_refused_with_the_hub_named() {
        let two = |a: Hub, b: Hub| State { hubs: vec![a, b] }.check().unwrap_err();
        let ppps = |loc: &str, usb: &str| hub(loc, usb, Switching::Ppps, 4);
        assert!(two(ppps("1-1", "2.10"), ppps("1-1", "2.10")).contains("described twice"));
        let mut t = ppps("1-1", "2.10");
        t.twin = Some("1-2".into());
        assert!(two(t.clone(), ppps("1-2", "2.10")).contains("other half"));
        assert!(two(t, ppps("9-9", "3.00")).contains("not described"));
        assert!(two(ppps("1-1", "2.10"), ppps("1-1.5", "2.10")).contains("has no port 5"));
        let mut d = ppps("1-1", "2.10");
        d.ports[1].device = Some(device("18d1:4ee7", "Google", "Pixel", "X", Speed::High));
        assert!(two(d, ppps("1-1.2", "2.10")).contains("both a device and hub"));
        let mut n = hub("1-1", "2.00", Switching::Nops, 2);
        n.ports[0].powered = false;
        assert!(State { hubs: vec![n] }.check().unwrap_err().contains("nops"));
        assert!(State { hubs: vec![ppps("one", "2.10")] }.check().unwrap_err().contains("not a location"));
    }
}
