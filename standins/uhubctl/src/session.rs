//! One uhubctl run on the described hubs: `usb_find_hubs` (which hubs are listed and acted
//! on, the USB2/USB3 twins) and `main`'s loop (Current status, `Sent power … request`,
//! New status; cycle and flash in two rounds with the delay between), as uhubctl.c does them.

use std::io::{self, Write};

use crate::describe;
use crate::enumerated::Enumerated;
use crate::options::{Action, Options};
use crate::state::{State, Switching};

/// What a run does besides printing: the tests' world records it, the real one sleeps
/// (scaled), writes the state file and runs the devices' hooks.
pub trait World {
    /// uhubctl's `sleep_ms` (the USB3 150 ms, `-w`, `-d`).
    fn sleep_ms(&mut self, ms: u64);
    /// The hubs changed: from now on others see them so.
    fn commit(&mut self, state: &State) -> io::Result<()>;
}

struct Run<'a> {
    o: &'a Options,
    state: &'a mut State,
    seen: Enumerated,
    /// `opt_ports`: `-s` narrows it as it matches.
    ports: u32,
}

/// Bit of `port` in a port mask (none above 32: never in uhubctl's mask either).
fn bit(port: usize) -> u32 {
    1u32.checked_shl(port as u32 - 1).unwrap_or(0)
}

/// Runs uhubctl with options `o`; returns its exit code. Messages go to `err` as uhubctl's do.
pub fn run(
    o: &Options,
    state: &mut State,
    world: &mut dyn World,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> io::Result<i32> {
    let seen = Enumerated::take(state);
    let mut r = Run { o, state, seen, ports: o.ports };
    let hubs = r.find_hubs();
    let physical = hubs.iter().filter(|&&i| !r.state.hubs[i].super_speed() || o.exact).count();
    if physical == 0 {
        let at = if o.location.is_empty() { String::new() } else { format!(" at location {}", o.location) };
        write!(err, "No compatible devices detected{at}!\nRun with -h to get usage info.\n")?;
        return Ok(1);
    }
    if physical > 1 && o.action != Action::Keep {
        write!(
            err,
            "Error: changing port state for multiple hubs at once is not supported.\nUse -l to limit operation to one hub!\n"
        )?;
        return Ok(1);
    }
    for k in 0..2 {
        let skip = match o.action {
            Action::On => k == 0,
            Action::Off | Action::Keep | Action::Toggle => k == 1,
            Action::Cycle | Action::Flash => false,
        };
        if skip {
            continue;
        }
        for &i in &hubs {
            r.round(i, k == 1, world, out)?;
        }
        if k == 0 && matches!(o.action, Action::Cycle | Action::Flash) {
            world.sleep_ms((o.delay * 1000.0) as u64);
        }
    }
    Ok(0)
}

impl Run<'_> {
    /// `usb_find_hubs`: the hubs acted on, in libusb's order (the state's).
    fn find_hubs(&mut self) -> Vec<usize> {
        let (o, state) = (self.o, &*self.state);
        let mut listed: Vec<(usize, bool)> = Vec::new();
        for (i, h) in state.hubs.iter().enumerate() {
            if !self.seen.hub(i) || (h.lpsm() != Switching::Ppps && !o.force) {
                continue;
            }
            let desc = describe::hub(h, o.nodesc);
            let mut actionable = true;
            if !o.search.is_empty() {
                actionable = false;
                for port in 1..=h.ports.len() {
                    let found = describe::attached(state, &self.seen, i, port, o.nodesc);
                    if found.is_some_and(|d| d.contains(&o.search)) {
                        actionable = true;
                        self.ports &= bit(port);
                        break;
                    }
                }
            }
            if !o.searchhub.is_empty() && !desc.contains(&o.searchhub) {
                actionable = false;
            }
            if !o.location.is_empty() && !o.location.eq_ignore_ascii_case(&h.location) {
                actionable = false;
            }
            if o.level > 0 && o.level != h.depth() as i64 + 1 {
                actionable = false;
            }
            let vendor = &h.id.to_ascii_lowercase();
            if !o.vendor.is_empty() && !vendor.get(..o.vendor.len()).is_some_and(|v| v.eq_ignore_ascii_case(&o.vendor))
            {
                actionable = false;
            }
            listed.push((i, actionable));
        }
        // USB2/3 duality: the listed twin of a hub acted on is acted on too (unless -e).
        if !o.exact {
            for n in 0..listed.len() {
                let (i, actionable) = listed[n];
                if !actionable {
                    continue;
                }
                if let Some(twin) = state.pair(i).and_then(|t| listed.iter().position(|&(j, _)| j == t)) {
                    listed[twin].1 = true;
                }
            }
        }
        listed.into_iter().filter(|&(_, a)| a).map(|(i, _)| i).collect()
    }

    fn print_ports(&self, i: usize, out: &mut dyn Write) -> io::Result<()> {
        // libusb_open fails on a hub that left the bus: uhubctl prints no ports then.
        if !self.seen.opens(i) {
            return Ok(());
        }
        let h = &self.state.hubs[i];
        for port in 1..=h.ports.len() {
            if self.ports > 0 && self.ports & bit(port) == 0 {
                continue;
            }
            let status = describe::status(self.state, &self.seen, i, port);
            let desc = describe::attached(self.state, &self.seen, i, port, self.o.nodesc);
            writeln!(out, "{}", describe::port_line(port, status, h.super_speed(), desc.as_deref()))?;
        }
        Ok(())
    }

    /// One hub in one round of `main`'s loop; `on` is uhubctl's k (the second round).
    fn round(&mut self, i: usize, on: bool, world: &mut dyn World, out: &mut dyn Write) -> io::Result<()> {
        let o = self.o;
        let (location, desc) = (self.state.hubs[i].location.clone(), describe::hub(&self.state.hubs[i], o.nodesc));
        writeln!(out, "Current status for hub {location} [{desc}]")?;
        self.print_ports(i, out)?;
        if o.action == Action::Keep || !self.seen.opens(i) {
            return Ok(());
        }
        let (n, ss) = (self.state.hubs[i].ports.len(), self.state.hubs[i].super_speed());
        let power_mask = if ss { describe::SS_POWER } else { describe::POWER };
        let mut should_be_on = if o.action == Action::Flash { !on } else { on };
        let mut changed = false;
        let mask = self.ports;
        for port in (1..=n).filter(|&p| bit(p) & mask != 0) {
            let is_on = describe::status(self.state, &self.seen, i, port) & power_mask != 0;
            if o.action == Action::Toggle {
                should_be_on = !is_on;
            }
            if is_on != should_be_on {
                changed |= self.set_port(i, port, should_be_on, world);
            }
        }
        if changed {
            self.seen.note(self.state);
            world.commit(self.state)?;
        }
        if !on && ss {
            world.sleep_ms(150); // USB3 hubs need extra delay to actually turn off
        }
        writeln!(out, "Sent power {} request", if should_be_on { "on" } else { "off" })?;
        writeln!(out, "New status for hub {location} [{desc}]")?;
        self.print_ports(i, out)?;
        if on && o.reset {
            writeln!(out, "Resetting hub...\nReset successful!")?;
        }
        Ok(())
    }

    /// `set_port_status`: what the hub does with SetPortFeature / ClearPortFeature(PORT_POWER)
    /// on `port` (sent `-r` times for off, `-w` ms apart). Whether anything changed.
    fn set_port(&mut self, i: usize, port: usize, on: bool, world: &mut dyn World) -> bool {
        let repeat = if on { 1 } else { self.o.repeat };
        for left in (0..repeat).rev() {
            if left > 0 {
                world.sleep_ms(self.o.wait.max(0) as u64);
            }
        }
        let h = &mut self.state.hubs[i];
        // The kernel (Linux < 6.0) powers the port again after too few off requests.
        if !on && repeat < i64::from(h.ports[port - 1].off_needs_repeat.max(1)) {
            return false;
        }
        let ports: Vec<usize> = match h.switching {
            Switching::Nops => vec![],
            Switching::Ganged => (1..=h.ports.len()).collect(),
            Switching::Ppps => vec![port],
        };
        let mut changed = false;
        for p in ports {
            changed |= std::mem::replace(&mut h.ports[p - 1].powered, on) != on;
        }
        changed
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
