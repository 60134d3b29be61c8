//! What libusb listed when uhubctl started (`libusb_get_device_list` in its main): uhubctl
//! describes devices from that list only. One that arrives while it runs — on a port it just
//! powered — is not in it (`connect []`, as uhubctl prints on real hubs); one that left and
//! came back is still listed under its old address, which no longer opens, so only its
//! vid:pid is printed (uhubctl.c's `get_device_description` when `libusb_open` fails).

use crate::state::State;

/// How libusb's list has what a port holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    No,
    /// Listed, and on the bus ever since.
    Live,
    /// Listed, but it left the bus since (its old handle no longer opens).
    Stale,
}

pub struct Enumerated {
    hubs: Vec<bool>,
    ports: Vec<Vec<bool>>,
    hubs_left: Vec<bool>,
    ports_left: Vec<Vec<bool>>,
}

impl Enumerated {
    pub fn take(state: &State) -> Enumerated {
        let ports: Vec<Vec<bool>> = state
            .hubs
            .iter()
            .enumerate()
            .map(|(i, h)| (1..=h.ports.len()).map(|p| state.on_bus(i, p)).collect())
            .collect();
        Enumerated {
            hubs: (0..state.hubs.len()).map(|i| state.present(i)).collect(),
            hubs_left: vec![false; state.hubs.len()],
            ports_left: ports.iter().map(|p| vec![false; p.len()]).collect(),
            ports,
        }
    }

    /// Notes what has left the bus after a switch.
    pub fn note(&mut self, state: &State) {
        for i in 0..state.hubs.len() {
            self.hubs_left[i] |= !state.present(i);
            for p in 1..=state.hubs[i].ports.len() {
                self.ports_left[i][p - 1] |= !state.on_bus(i, p);
            }
        }
    }

    /// Hub `i` was on the bus at the start.
    pub fn hub(&self, i: usize) -> bool {
        self.hubs[i]
    }

    /// Hub `i` was listed and has not left the bus since: uhubctl can open it.
    pub fn opens(&self, i: usize) -> bool {
        self.hubs[i] && !self.hubs_left[i]
    }

    /// How what port `port` of hub `i` holds is listed.
    pub fn port(&self, i: usize, port: usize) -> Listed {
        match (self.ports[i][port - 1], self.ports_left[i][port - 1]) {
            (false, _) => Listed::No,
            (true, false) => Listed::Live,
            (true, true) => Listed::Stale,
        }
    }
}
