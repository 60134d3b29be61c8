//! The devices' hooks (`on_vbus`, `on_bus`): a simulated phone is told when its charger
//! or its data connection comes or goes, at the moment the hub switches (e.g. `on_vbus` =
//! `["adb-phone", "power", DIR]`, which gets `usb` or `none`).

use std::io::Write;
use std::process::{Command, Stdio};

use crate::state::State;

#[derive(Debug, Clone, PartialEq)]
struct Seen {
    location: String,
    port: usize,
    id: String,
    serial: String,
    bus: bool,
    vbus: bool,
    on_bus: Vec<String>,
    on_vbus: Vec<String>,
}

impl Seen {
    fn same_device(&self, other: &Seen) -> bool {
        (&self.location, self.port, &self.id, &self.serial) == (&other.location, other.port, &other.id, &other.serial)
    }
}

/// The devices with hooks and what they had when last looked at.
pub struct Watch {
    seen: Vec<Seen>,
}

fn devices(state: &State) -> Vec<Seen> {
    let mut all = Vec::new();
    for (i, h) in state.hubs.iter().enumerate() {
        for (n, p) in h.ports.iter().enumerate() {
            let Some(d) = p.device.as_ref().filter(|d| !d.on_bus.is_empty() || !d.on_vbus.is_empty()) else {
                continue;
            };
            all.push(Seen {
                location: h.location.clone(),
                port: n + 1,
                id: d.id.clone(),
                serial: d.serial.clone(),
                bus: state.on_bus(i, n + 1),
                vbus: state.vbus(i, n + 1),
                on_bus: d.on_bus.clone(),
                on_vbus: d.on_vbus.clone(),
            });
        }
    }
    all
}

/// The hook calls (argv) from `before` to `after`, in the order things happen: the data
/// connection goes before the power, and comes after it.
fn calls(before: &[Seen], after: &[Seen]) -> Vec<Vec<String>> {
    let gone = |s: &Seen| Seen { bus: false, vbus: false, ..s.clone() };
    let mut pairs: Vec<(Seen, Seen)> = before
        .iter()
        .map(|b| (b.clone(), after.iter().find(|a| a.same_device(b)).cloned().unwrap_or_else(|| gone(b))))
        .collect();
    pairs.extend(after.iter().filter(|a| !before.iter().any(|b| b.same_device(a))).map(|a| (gone(a), a.clone())));
    let mut out = Vec::new();
    for (b, a) in pairs {
        let with = |argv: &[String], word: &str| [argv, &[word.to_string()]].concat();
        let bus = (b.bus != a.bus && !a.on_bus.is_empty())
            .then(|| with(&a.on_bus, if a.bus { "attached" } else { "detached" }));
        let vbus =
            (b.vbus != a.vbus && !a.on_vbus.is_empty()).then(|| with(&a.on_vbus, if a.vbus { "usb" } else { "none" }));
        if a.vbus {
            out.extend(vbus.into_iter().chain(bus));
        } else {
            out.extend(bus.into_iter().chain(vbus));
        }
    }
    out
}

impl Watch {
    pub fn new(state: &State) -> Watch {
        Watch { seen: devices(state) }
    }

    /// Runs the hooks of what changed since the last look; a hook that fails is reported on
    /// `err` (uhubctl itself goes on).
    pub fn update(&mut self, state: &State, err: &mut dyn Write) {
        let now = devices(state);
        for argv in calls(&self.seen, &now) {
            let run = Command::new(&argv[0]).args(&argv[1..]).stdin(Stdio::null()).stdout(Stdio::null()).output();
            let problem = match run {
                Ok(o) if o.status.success() => continue,
                Ok(o) => format!("{}: {}", o.status, String::from_utf8_lossy(&o.stderr).trim()),
                Err(e) => e.to_string(),
            };
            let _ = writeln!(err, "uhubctl stand-in: hook `{}` failed: {problem}", argv.join(" "));
        }
        self.seen = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tests::{device, hub};
    use crate::state::{Speed, Switching};

    fn phone_hub(vbus_stays: bool) -> State {
        let mut h = hub("1-1", "2.10", Switching::Ppps, 4);
        let mut d = device("18d1:4ee7", "Google", "Pixel 7", "2A111FDH200B4Z", Speed::High);
        d.on_vbus = vec!["phone".into(), "power".into()];
        d.on_bus = vec!["phone".into(), "bus".into()];
        h.ports[1].device = Some(d);
        h.ports[1].vbus_stays = vbus_stays;
        State { hubs: vec![h] }
    }

    fn switch(mut s: State, on: bool) -> (State, Vec<String>) {
        let before = devices(&s);
        s.hubs[0].ports[1].powered = on;
        let got = calls(&before, &devices(&s)).iter().map(|c| c.join(" ")).collect();
        (s, got)
    }

    #[test]
    fn a_port_cut_drops_the_bus_then_the_power_and_back_in_the_other_order() {
        let (s, off) = switch(phone_hub(false), false);
        assert_eq!(off, ["phone bus detached", "phone power none"]);
        let (_, on) = switch(s, true);
        assert_eq!(on, ["phone power usb", "phone bus attached"]);
    }

    #[test]
    fn a_port_that_keeps_vbus_only_drops_the_bus() {
        let (_, off) = switch(phone_hub(true), false);
        assert_eq!(off, ["phone bus detached"]);
    }

    #[test]
    fn an_unplugged_device_loses_both_and_nothing_fires_without_a_change() {
        let s = phone_hub(false);
        let before = devices(&s);
        assert!(calls(&before, &before).is_empty());
        let mut t = s.clone();
        t.hubs[0].ports[1].device = None;
        let got: Vec<String> = calls(&before, &devices(&t)).iter().map(|c| c.join(" ")).collect();
        assert_eq!(got, ["phone bus detached", "phone power none"]);
    }
}
