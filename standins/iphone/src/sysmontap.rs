//! The system monitor tap (DVT channel `com.apple.instruments.server.services.sysmontap`):
//! `setConfig:` (ur = interval in ms, procAttrs, sysAttrs, …), `start`, `stop`, none
//! replied to. After `start` the phone pushes one message without samples (the host
//! consumes it as an acknowledgement), then every interval an NSArray of one row:
//! `Processes` (NSNumber pid → the values of procAttrs in order), `System` (sysAttrs'
//! values, 0 here), `SystemCPUUsage`, `CPUCount`, `EnabledCPUs`. The running apps report
//! their profile (± 5 % jitter by pid and sample), a few system daemons fixed values. The
//! first sample's cpuUsage is 0 for every process, as a real tap's first is meaningless
//! (it has no earlier sample to measure from).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use plist::Value;

use crate::Server;
use crate::archive::{self, Obj};
use crate::processes::{Process, Processes};
use crate::profile::jitter;

pub const SERVICE: &str = "com.apple.instruments.server.services.sysmontap";
const DEFAULT_INTERVAL: Duration = Duration::from_millis(500);
const MIN_INTERVAL: Duration = Duration::from_millis(10);
const CPU_COUNT: u64 = 2;

/// System processes every phone runs: `(pid, name, cpu %, footprint MiB)`.
pub const DAEMONS: [(u64, &str, f64, f64); 4] = [
    (0, "kernel_task", 2.0, 40.0),
    (1, "launchd", 0.1, 3.0),
    (34, "SpringBoard", 3.0, 90.0),
    (61, "backboardd", 1.5, 25.0),
];

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub interval: Duration,
    pub proc_attrs: Vec<String>,
    pub sys_attrs: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config { interval: DEFAULT_INTERVAL, proc_attrs: vec!["pid".into()], sys_attrs: Vec::new() }
    }
}

impl Config {
    /// From `setConfig:`'s dictionary: `ur` (ms) or else `sampleInterval` (ns).
    pub fn from_value(v: &Value) -> Config {
        let d = v.as_dictionary();
        let get = |k: &str| d.and_then(|d| d.get(k));
        let strings = |k: &str| -> Vec<String> {
            get(k)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|s| s.as_string().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        let number = |k: &str| get(k).and_then(|v| v.as_unsigned_integer().or_else(|| v.as_real().map(|r| r as u64)));
        let interval = match (number("ur"), number("sampleInterval")) {
            (Some(ms), _) if ms > 0 => Duration::from_millis(ms),
            (_, Some(ns)) if ns > 0 => Duration::from_nanos(ns),
            _ => DEFAULT_INTERVAL,
        };
        Config {
            interval: interval.max(MIN_INTERVAL),
            proc_attrs: strings("procAttrs"),
            sys_attrs: strings("sysAttrs"),
        }
    }
}

/// One process as the tap measures it in sample `n`.
struct Measured {
    pid: u64,
    name: String,
    cpu: f64,
    footprint: u64,
}

fn measure(running: &[Process], n: u64) -> Vec<Measured> {
    let mut out: Vec<Measured> = DAEMONS
        .iter()
        .map(|(pid, name, cpu, mb)| Measured {
            pid: *pid,
            name: (*name).into(),
            cpu: *cpu,
            footprint: (mb * 1048576.0) as u64,
        })
        .collect();
    for p in running {
        let name = if p.executable.is_empty() { p.bundle_id.clone() } else { p.executable.clone() };
        let cpu = p.profile.cpu_pct * jitter(p.pid, n, "cpu");
        let footprint = (p.profile.footprint_mb * 1048576.0 * jitter(p.pid, n, "footprint")) as u64;
        out.push(Measured { pid: p.pid, name, cpu, footprint });
    }
    if n == 0 {
        for m in &mut out {
            m.cpu = 0.0;
        }
    }
    out
}

fn attribute(m: &Measured, attr: &str) -> Obj {
    match attr {
        "pid" => Obj::int(m.pid),
        "name" => Obj::str(&m.name),
        "cpuUsage" => Obj::real(m.cpu),
        "physFootprint" => Obj::int(m.footprint),
        // Resident memory includes shared pages the footprint does not count.
        "memResidentSize" => Obj::int(m.footprint + m.footprint / 4),
        _ => Obj::int(0),
    }
}

/// Sample `n`: an NSArray of one row.
pub fn sample(config: &Config, running: &[Process], n: u64) -> Obj {
    let measured = measure(running, n);
    let total: f64 = measured.iter().map(|m| m.cpu).sum();
    let processes = measured
        .iter()
        .map(|m| (Obj::int(m.pid), Obj::Array(config.proc_attrs.iter().map(|a| attribute(m, a)).collect())))
        .collect();
    let cpu_usage = [
        ("CPU_TotalLoad", total),
        ("CPU_UserLoad", total * 0.8),
        ("CPU_SystemLoad", total * 0.2),
        ("CPU_NiceLoad", 0.0),
    ]
    .into_iter()
    .map(|(k, v)| (Obj::str(k), Obj::real(v)))
    .collect();
    Obj::Array(vec![Obj::Dict(vec![
        (Obj::str("Processes"), Obj::Dict(processes)),
        (Obj::str("System"), Obj::Array(config.sys_attrs.iter().map(|_| Obj::int(0)).collect())),
        (Obj::str("SystemCPUUsage"), Obj::Dict(cpu_usage)),
        (Obj::str("CPUCount"), Obj::int(CPU_COUNT)),
        (Obj::str("EnabledCPUs"), Obj::int(CPU_COUNT)),
    ])])
}

/// What the phone pushes right after `start`: the CPU counts, no samples.
pub fn acknowledgement() -> Obj {
    Obj::Array(vec![Obj::Dict(vec![
        (Obj::str("CPUCount"), Obj::int(CPU_COUNT)),
        (Obj::str("EnabledCPUs"), Obj::int(CPU_COUNT)),
    ])])
}

/// A started tap: its thread pushes until `stop`, the channel's cancel or the end of the
/// connection.
pub struct Tap {
    stop: Arc<AtomicBool>,
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Pushes the acknowledgement now and a sample every interval through `push` (a message
/// of the phone's on the channel) until the returned tap is dropped or a push fails.
pub fn start(
    server: &Arc<Server>,
    udid: &str,
    config: Config,
    push: impl Fn(Vec<u8>) -> io::Result<()> + Send + 'static,
) -> io::Result<Tap> {
    push(archive::encode_obj(&acknowledgement()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, server, udid) = (Arc::clone(&stop), Arc::clone(server), udid.to_string());
    std::thread::spawn(move || {
        let began = Instant::now();
        for n in 0u64.. {
            std::thread::sleep((config.interval * (n as u32 + 1)).saturating_sub(began.elapsed()));
            if flag.load(Ordering::Relaxed) {
                break;
            }
            let running = Processes::load(&server.store, &udid).map(|p| p.running).unwrap_or_default();
            if push(archive::encode_obj(&sample(&config, &running, n))).is_err() {
                break;
            }
        }
    });
    Ok(Tap { stop })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    #[test]
    fn samples_carry_the_apps_profile_in_the_asked_order_and_the_first_has_no_cpu() {
        let cfg = Config::from_value(&Value::Dictionary(
            [
                ("ur".to_string(), Value::Integer(250.into())),
                (
                    "procAttrs".to_string(),
                    Value::Array(vec!["pid".into(), "cpuUsage".into(), "physFootprint".into(), "ppid".into()]),
                ),
                ("sysAttrs".to_string(), Value::Array(vec!["vmFreeCount".into()])),
            ]
            .into_iter()
            .collect(),
        ));
        assert_eq!(cfg.interval, Duration::from_millis(250));
        let app = Process {
            pid: 1001,
            bundle_id: "com.x".into(),
            env: serde_json::Map::new(),
            args: vec![],
            suspended: false,
            executable: "X".into(),
            profile: Profile { cpu_pct: 40.0, footprint_mb: 100.0, energy_cost: 1.0 },
        };
        let rows = |n| {
            let v = archive::decode(&archive::encode_obj(&sample(&cfg, std::slice::from_ref(&app), n))).unwrap();
            v.as_array().unwrap()[0].as_dictionary().unwrap().clone()
        };
        let first = rows(0);
        let procs = first["Processes"].as_dictionary().unwrap();
        assert_eq!(procs.len(), DAEMONS.len() + 1);
        assert!(procs.values().all(|v| v.as_array().unwrap()[1].as_real() == Some(0.0)), "first sample: no cpu");
        let later = rows(3);
        let values = later["Processes"].as_dictionary().unwrap()["1001"].as_array().unwrap().clone();
        assert_eq!(values[0].as_unsigned_integer(), Some(1001));
        assert!((values[1].as_real().unwrap() - 40.0).abs() <= 2.0, "{values:?}");
        assert!((values[2].as_unsigned_integer().unwrap() as f64 - 100.0 * 1048576.0).abs() <= 5.0 * 1048576.0);
        assert_eq!(values[3].as_unsigned_integer(), Some(0), "not modelled: 0");
        assert_eq!(later["System"].as_array().unwrap().len(), 1);
    }
}
