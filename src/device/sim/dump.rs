//! Writes a trial's log as the simulated phone's raw dump, a plain line format
//! (docs/sim.md) that `collect::sim::dump::parse` reads back.

use std::fmt::Write as _;
use std::time::Duration;

use super::log::{EventKind, TrialLog};
use crate::collect::sim::dump::MAGIC;
use crate::config::Platform;

/// File name of the dump in the trial's artifact folder.
pub const DUMP_FILE: &str = "sim-energy.log";

/// Who and what the dump is about.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpHeader {
    pub device: String,
    pub model: String,
    pub os: String,
    pub emulates: Platform,
    pub app: String,
    pub trial: String,
    pub seed: u64,
    pub battery_mah: f64,
    pub voltage_v: f64,
    pub request_interval: Option<Duration>,
    /// Device-clock time of the launch.
    pub launched_at: Duration,
}

/// Seconds with three decimals, written where it is formatted (no `String` each).
struct Secs(Duration);

impl std::fmt::Display for Secs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.3}", self.0.as_secs_f64())
    }
}

fn secs(d: Duration) -> Secs {
    Secs(d)
}

fn flag(b: bool) -> u8 {
    u8::from(b)
}

/// The dump's text. Deterministic: the same header and log give the same bytes.
pub fn render(h: &DumpHeader, log: &TrialLog) -> String {
    let mut s = String::new();
    // Writing into a String cannot fail.
    let _ = write_dump(&mut s, h, log);
    s
}

fn write_dump(s: &mut String, h: &DumpHeader, log: &TrialLog) -> std::fmt::Result {
    let imitates = match h.emulates {
        Platform::Android => "dumpsys battery / batterystats history, per-process CPU and PSS samples",
        _ => "the IOPMPowerSource battery registry, sysmontap samples and Xcode's energy gauge",
    };
    writeln!(s, "{MAGIC}")?;
    writeln!(s, "# simulated {} ({}); imitates {imitates}; format: docs/sim.md", h.model, h.emulates)?;
    writeln!(s, "device {}", h.device)?;
    writeln!(s, "model {}", h.model)?;
    writeln!(s, "os {}", h.os)?;
    writeln!(s, "emulates {}", h.emulates)?;
    writeln!(s, "app {}", h.app)?;
    writeln!(s, "trial {}", h.trial)?;
    writeln!(s, "seed {}", h.seed)?;
    writeln!(s, "battery_mah {}", h.battery_mah)?;
    writeln!(s, "voltage_v {}", h.voltage_v)?;
    match h.request_interval {
        Some(iv) => {
            writeln!(s, "request_interval_s {}", secs(iv))?;
        }
        None => {
            writeln!(s, "request_interval_s none")?;
        }
    }
    writeln!(s, "launched_at_s {}", secs(h.launched_at))?;
    writeln!(
        s,
        "# battery: t s since launch, level %, charge counter mAh, current mA (negative = discharging), external power, charging, temperature °C"
    )?;
    for r in &log.records {
        writeln!(
            s,
            "battery t={} level={} charge_mah={} current_ma={:.1} ext={} charging={} temp_c={:.2}",
            secs(r.t),
            r.level_pct,
            r.charge_mah,
            r.current_ma,
            flag(r.external_power),
            flag(r.charging),
            r.temp_c
        )?;
    }
    writeln!(
        s,
        "# sample: interval ending at t (length dt s): CPU % of one core, memory MB, wakeups, requests sent and served from cache, energy level 0-20"
    )?;
    for x in &log.samples {
        writeln!(
            s,
            "sample t={} dt={} cpu={:.2} mem_mb={:.2} wakeups={} sent={} cached={} energy={}",
            secs(x.t),
            secs(x.dt),
            x.cpu_pct,
            x.memory_mb,
            x.wakeups,
            x.sent,
            x.cached,
            x.energy_level
        )?;
    }
    writeln!(s, "# event: what happened to the phone or the app during the trial")?;
    for e in &log.events {
        match e.kind {
            EventKind::Brightness { pct } => writeln!(s, "event t={} kind={} value={pct}", secs(e.t), e.kind.name())?,
            _ => writeln!(s, "event t={} kind={}", secs(e.t), e.kind.name())?,
        }
    }
    if let Some(end) = &log.end {
        writeln!(
            s,
            "end t={} requests_sent={} requests_cached={} app_alive={}",
            secs(end.t),
            end.requests_sent,
            end.requests_cached,
            flag(end.app_alive)
        )?;
    }
    Ok(())
}
