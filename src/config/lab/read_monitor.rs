//! `[[monitor]]` of lab.toml, and `[[device]] monitor`: which power monitor supplies which
//! device (docs/platforms/monitors.md).

use crate::config::lab::read_device::{read_host_name, read_name};
use crate::config::syntax::names::NameSet;
use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::{Field, Table};
use crate::config::{DeviceSpec, Host, MonitorKind, MonitorSpec, MonsoonModel, OtiiModel, Platform, TetherSpec};

const MONITOR_KEYS: &[&str] =
    &["name", "kind", "host", "model", "address", "device", "serial", "voltage_v", "current_limit_a", "sample_rate_hz"];
const KINDS: &[&str] = &["otii", "monsoon", "sim"];
/// The Otii 3 TCP server's port when it is started without one.
pub(crate) const OTII_DEFAULT_ADDRESS: &str = "127.0.0.1:1905";
/// A phone's battery, for the simulated monitor when no voltage is given.
const SIM_VOLTAGE_V: f64 = 3.85;
/// The simulated monitor's samples a second when none is given.
const SIM_SAMPLE_RATE_HZ: u32 = 10;
/// The current limit when none is given: enough for a phone at full load, below every
/// instrument's maximum.
const DEFAULT_CURRENT_LIMIT_A: f64 = 3.0;

/// Every `[[monitor]]` that reads whole, and the names of all (a device naming one that is
/// wrong is not told again that it does not exist).
pub(crate) fn read_monitors(root: &Table, p: &mut Problems, hosts: &[Host]) -> (Vec<MonitorSpec>, Vec<String>) {
    let mut names = NameSet::new("monitor");
    let tables = root.get("monitor").and_then(|f| f.tables(p)).unwrap_or_default();
    let declared = tables.iter().filter_map(|t| t.get("name")?.item.as_str().map(str::to_string)).collect();
    (tables.iter().filter_map(|t| read_monitor(t, p, hosts, &mut names)).collect(), declared)
}

fn read_monitor(t: &Table, p: &mut Problems, hosts: &[Host], names: &mut NameSet) -> Option<MonitorSpec> {
    t.check_keys(p, MONITOR_KEYS);
    let name = read_name(t, p, names, "monitor", "otii-1");
    let host = read_host_name(t, p, hosts);
    let kind =
        t.required(p, "kind", "kind = \"otii\"").and_then(|f| f.one_of(p, KINDS)).and_then(|k| read_kind(t, p, k));
    let kind = kind?;
    // A Monsoon's USB is read by the machine `lab` runs on: not through an SSH host.
    let remote =
        hosts.iter().find(|h| Some(&h.name) == host.as_ref()).is_some_and(|h| h.kind != crate::config::HostKind::Local);
    if matches!(kind, MonitorKind::Monsoon { .. }) && remote {
        if let Some(f) = t.get("host") {
            f.problem(
                p,
                format!("a Monsoon is read over the USB of the machine `lab` runs on, and host `{}` is reached over SSH", host.as_deref().unwrap_or_default()),
                "run `lab` on that host with a lab file of its own, or plug the Monsoon into this machine (`host = \"local\"`)",
            );
        }
        return None;
    }
    let limits = kind.limits();
    let (lo, hi) = limits.voltage_v;
    let voltage = match t.get("voltage_v") {
        Some(f) => {
            f.number_where(p, |v| (lo..=hi).contains(&v), &format!("between {lo} and {hi} V on the {}", kind.label()))
        }
        // A wrong voltage can harm the device: a real instrument's is never guessed.
        None if kind == MonitorKind::Sim => Some(SIM_VOLTAGE_V),
        None => {
            p.push(
                t.span(),
                &crate::config::syntax::table::join(t.path(), "voltage_v"),
                format!("missing `voltage_v`: the {} supplies the device in place of its battery", kind.label()),
                "set the battery's nominal voltage, e.g. `voltage_v = 3.85` (its label says it)",
            );
            None
        }
    };
    let max = limits.max_current_a;
    let current = t.get("current_limit_a").map_or(Some(DEFAULT_CURRENT_LIMIT_A.min(max)), |f| {
        f.number_where(p, |a| a > 0.0 && a <= max, &format!("above 0 and at most {max} A on the {}", kind.label()))
    });
    let rates = limits.sample_rates_hz;
    let rate = match t.get("sample_rate_hz") {
        // A simulated phone's hour in a few thousand samples: simulated campaigns run in seconds.
        None if kind == MonitorKind::Sim => Some(SIM_SAMPLE_RATE_HZ),
        // The fastest up to 5 kHz (Monsoon's rate, and a day's soak of samples in memory).
        None => Some(rates.iter().copied().filter(|&r| r <= 5000).max().unwrap_or(rates[0])),
        Some(f) if rates.len() == 1 => {
            f.problem(
                p,
                format!("the {} samples at {} Hz, which cannot be set", kind.label(), rates[0]),
                "remove `sample_rate_hz`",
            );
            None
        }
        Some(f) => f.integer(p).and_then(|r| {
            if rates.iter().any(|&x| i64::from(x) == r) {
                return Some(r as u32);
            }
            let list: Vec<String> = rates.iter().map(u32::to_string).collect();
            f.problem(
                p,
                format!("the {} cannot sample at {r} Hz", kind.label()),
                format!("use one of: {}", list.join(", ")),
            );
            None
        }),
    };
    Some(MonitorSpec {
        name: name?,
        host: host?,
        kind,
        voltage_v: voltage?,
        current_limit_a: current?,
        sample_rate_hz: rate?,
        supplies: None,
    })
}

fn read_kind(t: &Table, p: &mut Problems, kind: &str) -> Option<MonitorKind> {
    let only = |p: &mut Problems, keys: &[&str]| {
        for key in ["model", "address", "device", "serial"] {
            if let Some(f) = t.get(key).filter(|_| !keys.contains(&key)) {
                f.key_problem(p, format!("a `{kind}` monitor has no `{key}`"), format!("remove `{key}`"));
            }
        }
    };
    match kind {
        "otii" => {
            only(p, &["model", "address", "device"]);
            let model = match t.get("model") {
                None => Some(OtiiModel::Arc),
                Some(f) => {
                    f.one_of(p, &["arc", "ace"]).map(|m| if m == "ace" { OtiiModel::Ace } else { OtiiModel::Arc })
                }
            };
            let address = t.get("address").map_or(Some(OTII_DEFAULT_ADDRESS.to_string()), |f| address(&f, p));
            let device = t.get("device").map_or(Some(None), |f| f.text(p).map(Some));
            Some(MonitorKind::Otii { model: model?, address: address?, device: device? })
        }
        "monsoon" => {
            only(p, &["model", "serial"]);
            let model = match t.get("model") {
                None => Some(MonsoonModel::Hvpm),
                Some(f) => f
                    .one_of(p, &["hvpm", "lvpm"])
                    .map(|m| if m == "lvpm" { MonsoonModel::Lvpm } else { MonsoonModel::Hvpm }),
            };
            let serial = t.required(p, "serial", "serial = \"20001\"").and_then(|f| f.text(p));
            Some(MonitorKind::Monsoon { model: model?, serial: serial? })
        }
        _ => {
            only(p, &[]);
            Some(MonitorKind::Sim)
        }
    }
}

/// `HOST:PORT` of an Otii server.
fn address(f: &Field, p: &mut Problems) -> Option<String> {
    let a = f.text(p)?;
    match a.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|n| n > 0) => Some(a),
        _ => {
            f.problem(
                p,
                format!("`{a}` is not HOST:PORT"),
                format!("write the Otii server's address, e.g. `address = \"{OTII_DEFAULT_ADDRESS}\"`"),
            );
            None
        }
    }
}

/// `[[device]] monitor = "NAME"` of each device table (in `devices`' order, which read
/// them): each names a monitor of this lab on the device's own host, of a kind the device
/// can be measured by, and no monitor supplies two devices.
pub(crate) fn assign_monitors(
    devices: &[(&Table, &DeviceSpec)],
    (monitors, declared): (&mut [MonitorSpec], &[String]),
    p: &mut Problems,
) {
    for &(t, d) in devices {
        let Some(f) = t.get("monitor") else { continue };
        let Some(name) = f.text(p) else { continue };
        let Some(m) = monitors.iter_mut().find(|m| m.name == name) else {
            if declared.contains(&name) {
                continue;
            }
            let known: Vec<&str> = monitors.iter().map(|m| m.name.as_str()).collect();
            let fix = if known.is_empty() {
                format!("add a [[monitor]] with name = \"{name}\"")
            } else {
                format!("add a [[monitor]] with name = \"{name}\", or use one of: {}", known.join(", "))
            };
            f.problem(p, format!("monitor `{name}` is not defined in this lab"), fix);
            continue;
        };
        if let Some(other) = &m.supplies {
            f.problem(
                p,
                format!("monitor `{name}` already supplies device `{other}`: a monitor powers one device"),
                format!("give `{}` a [[monitor]] of its own", d.name),
            );
            continue;
        }
        if m.host != d.host {
            f.problem(
                p,
                format!("monitor `{name}` is on host `{}`, device `{}` on host `{}`", m.host, d.name, d.host),
                format!("set the monitor's `host = \"{}\"`, where the device is wired to it", d.host),
            );
            continue;
        }
        let sim_device = d.platform() == Platform::Sim;
        if sim_device != (m.kind == MonitorKind::Sim) {
            let (msg, fix) = if sim_device {
                (
                    format!("a simulated device runs in simulated time: the {} cannot measure it", m.kind.label()),
                    "give it a `kind = \"sim\"` monitor, or remove `monitor`".to_string(),
                )
            } else {
                (
                    format!("a simulated monitor measures only simulated devices, not `{}`", d.name),
                    "use a `kind = \"otii\"` or `\"monsoon\"` monitor for a real device".to_string(),
                )
            };
            f.problem(p, msg, fix);
            continue;
        }
        m.supplies = Some(d.name.clone());
    }
    // `tether = "monitor"`: only a Monsoon supplying the device switches its USB.
    for &(t, d) in devices.iter().filter(|(_, d)| d.tether == TetherSpec::Monitor) {
        let by = monitors.iter().find(|m| m.supplies.as_deref() == Some(d.name.as_str()));
        if by.is_some_and(|m| matches!(m.kind, MonitorKind::Monsoon { .. })) {
            continue;
        }
        let Some(f) = t.get("tether") else { continue };
        let why = match by {
            Some(m) => {
                format!("its monitor `{}` is an {}, which has no USB passthrough to switch", m.name, m.kind.label())
            }
            None => "no [[monitor]] supplies it".to_string(),
        };
        f.problem(
            p,
            format!("`tether = \"monitor\"` needs a Monsoon supplying the device: {why}"),
            "give the device a `monitor` of `kind = \"monsoon\"`, or choose another tether",
        );
    }
}
