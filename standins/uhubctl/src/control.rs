//! The stand-in's own commands, for tests (never uhubctl's; not written to UHUBCTL_LOG):
//!
//! ```text
//! uhubctl --standin-plug LOC PORT none                               # pull the cable
//! uhubctl --standin-plug LOC PORT VID:PID [VENDOR [PRODUCT [SERIAL]]] # plug a device in
//! uhubctl --standin-vbus LOC PORT                                    # prints on or off
//! uhubctl --standin-bus LOC PORT     # on: a device is plugged in there and is on the bus
//! ```
//!
//! A simulated phone with `[device.sim] standin_hub` asks `--standin-vbus` and
//! `--standin-bus` each time its tether switches its port (docs/sim.md).

use std::io::Write;

use crate::live::Live;
use crate::session::World;
use crate::state::{Device, State};

const USAGE: &str = "usage: uhubctl --standin-plug LOC PORT none|VID:PID [VENDOR [PRODUCT [SERIAL]]] \
                     | --standin-vbus LOC PORT | --standin-bus LOC PORT";

fn port_of(state: &State, loc: &str, port: &str) -> Result<(usize, usize), String> {
    let i = state.index(loc).ok_or(format!("uhubctl stand-in: no hub {loc:?} is described"))?;
    let n = state.hubs[i].ports.len();
    match port.parse::<usize>() {
        Ok(p) if (1..=n).contains(&p) => Ok((i, p)),
        _ => Err(format!("uhubctl stand-in: hub {loc} has ports 1 to {n}, not {port:?}")),
    }
}

fn run(args: &[String], out: &mut dyn Write) -> Result<(), String> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["--standin-vbus", loc, port] => {
            let (_live, state) = Live::open()?;
            let (i, p) = port_of(&state, loc, port)?;
            writeln!(out, "{}", if state.vbus(i, p) { "on" } else { "off" }).map_err(|e| e.to_string())
        }
        ["--standin-bus", loc, port] => {
            let (_live, state) = Live::open()?;
            let (i, p) = port_of(&state, loc, port)?;
            let on = state.hubs[i].ports[p - 1].device.is_some() && state.on_bus(i, p);
            writeln!(out, "{}", if on { "on" } else { "off" }).map_err(|e| e.to_string())
        }
        ["--standin-plug", loc, port, what @ ..] if !what.is_empty() && what.len() <= 4 => {
            let (mut live, mut state) = Live::open()?;
            let (i, p) = port_of(&state, loc, port)?;
            let device = match what {
                ["none"] => None,
                [id, rest @ ..] => {
                    let field = |n: usize| rest.get(n).map(|s| s.to_string()).unwrap_or_default();
                    Some(Device {
                        id: id.to_string(),
                        vendor: field(0),
                        product: field(1),
                        serial: field(2),
                        speed: Default::default(),
                        on_vbus: vec![],
                        on_bus: vec![],
                    })
                }
                [] => unreachable!("checked above"),
            };
            state.hubs[i].ports[p - 1].device = device;
            state.check().map_err(|e| format!("uhubctl stand-in: {e}"))?;
            live.commit(&state).map_err(|e| format!("uhubctl stand-in: {e}"))
        }
        _ => Err(USAGE.to_string()),
    }
}

/// Runs one `--standin-*` command; its exit code.
pub fn main(args: &[String]) -> i32 {
    match run(args, &mut std::io::stdout()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}
