//! Trials on a power monitor (docs/platforms/monitors.md): the monitor each device is on,
//! opened before its first trial and closed after its last, and what a recording gives —
//! the soak window's figures as measurements, a downsampled power series for the report,
//! and every sample as `.npy` files in the attempt's folder.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::collect::monitor::{GapLimits, PowerTrace, Voltage, WindowFigures, npy_f32};
use crate::config::{Lab, MonitorKind, MonitorSpec};
use crate::device::Device;
use crate::measure::{MONITOR_POWER_MW, Measurement, Series};
use crate::monitor::monsoon::UsbLink;
use crate::monitor::{MonitorError, PowerMonitor, SharedMonitor};
use crate::transport::{Hosts, Transport};

/// Makes the link a Monsoon is opened over in place of this machine's USB (a scripted fake).
pub type UsbOpener = Arc<dyn Fn() -> Box<dyn UsbLink> + Send + Sync>;

/// The monitor a device is on, how to reach its host, and where the opened monitor is
/// kept for the device's worker and its tether.
#[derive(Clone)]
pub struct MonitorPlace {
    pub spec: MonitorSpec,
    pub transport: Arc<dyn Transport>,
    /// The monitor's host is not this machine.
    pub remote: bool,
    pub slot: SharedMonitor,
    /// A Monsoon's USB in place of this machine's, for tests.
    pub usb: Option<UsbOpener>,
}

/// Where `device`'s monitor is, if a `[[monitor]]` supplies it.
pub fn monitor_place(lab: &Lab, hosts: &Hosts, device: &str) -> Option<MonitorPlace> {
    let spec = lab.monitor_of(device)?;
    let transport = hosts.get(&spec.host)?;
    let remote = lab.host(&spec.host).is_some_and(|h| !matches!(h.kind, crate::config::HostKind::Local));
    Some(MonitorPlace { spec: spec.clone(), transport, remote, slot: SharedMonitor::default(), usb: None })
}

/// Opens the monitor at `place` for `device`'s trials; a simulated one is the simulated
/// device's own.
pub async fn open_monitor(
    place: &MonitorPlace,
    device: &dyn Device,
    timeout: Duration,
) -> Result<Box<dyn PowerMonitor>, MonitorError> {
    if place.spec.kind == MonitorKind::Sim {
        return device.simulated_monitor(&place.spec).ok_or_else(|| MonitorError::Failed {
            monitor: place.spec.name.clone(),
            detail: format!("a simulated monitor supplies only a simulated device, not `{}`", device.name()),
        });
    }
    let usb = place.usb.as_ref().map(|make| make());
    let opening = crate::monitor::open(&place.spec, &place.transport, place.remote, timeout, usb);
    tokio::time::timeout(timeout + Duration::from_secs(5), opening).await.unwrap_or_else(|_| {
        Err(MonitorError::Failed {
            monitor: place.spec.name.clone(),
            detail: format!("opening it did not finish within {} s", timeout.as_secs()),
        })
    })
}

/// What people read about a monitor: the source of its figures, with the instrument's identity.
pub fn source_of(monitor: &dyn PowerMonitor) -> String {
    let id = monitor.identity();
    let mut parts = Vec::new();
    for key in ["model", "type", "name", "serial", "firmware", "version"] {
        match &id[key] {
            serde_json::Value::String(s) if !s.is_empty() => parts.push(format!("{key} {s}")),
            serde_json::Value::Object(o) => {
                let v: Vec<String> =
                    o.iter().map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or(&v.to_string()))).collect();
                parts.push(format!("{key} {}", v.join(" ")));
            }
            _ => {}
        }
    }
    format!(
        "{SOURCE}: {}{}",
        monitor.label(),
        if parts.is_empty() { String::new() } else { format!(", {}", parts.join(", ")) }
    )
}

/// Every monitor figure's source starts so: they are never pooled with a phone's own gauge
/// or estimates (their metrics have names of their own, `monitor_…`).
pub const SOURCE: &str = "power monitor (J)";

/// The most points of a recording's power series kept in the store: enough for a plot.
const SERIES_POINTS: usize = 600;

/// A recording's window, on the trace's clock, and where its files go.
pub struct Window<'a> {
    pub trace: &'a PowerTrace,
    pub start_s: f64,
    pub end_s: f64,
    pub warmup_s: f64,
    /// The files' name stem in the attempt's folder: `current` (soak) or `idle_current`.
    pub stem: &'a str,
}

impl Window<'_> {
    pub fn figures(&self) -> WindowFigures {
        WindowFigures::of(self.trace, self.start_s, self.end_s, self.warmup_s, GapLimits::default())
    }

    /// Writes the samples (`<stem>.npy`, amperes as float32; `<stem>_voltage.npy` where
    /// the monitor samples voltage) and what a reader needs to place them in time
    /// (`<stem>.json`).
    pub fn write(&self, dir: &Path, figures: &WindowFigures, identity: &serde_json::Value) -> std::io::Result<()> {
        let t = self.trace;
        std::fs::write(dir.join(format!("{}.npy", self.stem)), npy_f32(&t.current_a))?;
        let voltage = match &t.voltage {
            Voltage::Constant(v) => json!(v),
            Voltage::Sampled(v) => {
                std::fs::write(dir.join(format!("{}_voltage.npy", self.stem)), npy_f32(v))?;
                json!(format!("{}_voltage.npy", self.stem))
            }
        };
        let about = json!({
            "samples": format!("{}.npy", self.stem),
            "unit": "A",
            "sample_rate_hz": t.rate_hz,
            "t0_s": t.t0_s,
            "voltage_v": voltage,
            "gaps": t.gaps.iter().map(|g| json!({"before_sample": g.at, "missing": g.missing})).collect::<Vec<_>>(),
            "window": {"start_s": self.start_s, "end_s": self.end_s, "warmup_s": self.warmup_s},
            "figures": {
                "energy_j": figures.energy_j, "avg_power_mw": figures.avg_power_mw,
                "avg_current_ma": figures.avg_current_ma, "peak_current_ma": figures.peak_current_ma,
                "samples": figures.samples, "dropped": figures.dropped, "invalid": figures.invalid,
            },
            "monitor": identity,
        });
        let text = serde_json::to_string_pretty(&about).unwrap_or_default();
        std::fs::write(dir.join(format!("{}.json", self.stem)), text)
    }

    /// Power over the window, mW, at most [`SERIES_POINTS`] points, each the mean of its
    /// stretch of samples; time in seconds from the soak's start.
    pub fn power_series(&self, source: &str) -> Series {
        let t = self.trace;
        let inside: Vec<(usize, f64)> =
            t.times().enumerate().filter(|&(_, at)| at >= self.start_s && at < self.end_s).collect();
        let per = inside.len().div_ceil(SERIES_POINTS).max(1);
        let points = inside
            .chunks(per)
            .map(|c| {
                let mw: f64 = c.iter().map(|&(i, _)| f64::from(t.current_a[i]) * t.volts(i) * 1000.0).sum::<f64>()
                    / c.len() as f64;
                let mid = (c[0].1 + c[c.len() - 1].1) / 2.0;
                (mid - self.start_s, mw)
            })
            .collect();
        Series::new(MONITOR_POWER_MW, "mW", source, points)
    }
}

/// The soak's figures as measurements.
pub fn soak_measurements(f: &WindowFigures, source: &str) -> Vec<Measurement> {
    vec![
        Measurement::new("monitor_energy_j", f.energy_j, "J", source),
        Measurement::new("monitor_avg_power_mw", f.avg_power_mw, "mW", source),
        Measurement::new("monitor_avg_current_ma", f.avg_current_ma, "mA", source),
        Measurement::new("monitor_peak_current_ma", f.peak_current_ma, "mA", source),
        Measurement::new("monitor_samples", f.samples as f64, "count", source),
        Measurement::new("monitor_sample_rate_hz", f.sample_rate_hz, "Hz", source),
        Measurement::new("monitor_dropped_samples", f.dropped as f64, "count", source),
    ]
}

/// The app's net energy: the soak's less what the phone drew idle over as long (the idle
/// recording's mean power × the soak window's length).
pub fn net_measurements(soak: &WindowFigures, idle: &WindowFigures, source: &str) -> Vec<Measurement> {
    let net = soak.energy_j - idle.avg_power_mw / 1000.0 * soak.duration_s;
    vec![
        Measurement::new("monitor_idle_power_mw", idle.avg_power_mw, "mW", source),
        Measurement::new("monitor_net_energy_j", net, "J", source),
    ]
}

/// Energy per request the app made, mJ: gross, and net where there is an idle baseline.
pub fn per_request(measured: &[Measurement], requests: u64, source: &str) -> Vec<Measurement> {
    if requests == 0 {
        return Vec::new();
    }
    let of = |metric: &str| measured.iter().find(|m| m.metric == metric).map(|m| m.value);
    let mut out = Vec::new();
    if let Some(j) = of("monitor_energy_j") {
        out.push(Measurement::new("energy_per_request_mj", j * 1000.0 / requests as f64, "mJ", source));
    }
    if let Some(j) = of("monitor_net_energy_j") {
        out.push(Measurement::new("net_energy_per_request_mj", j * 1000.0 / requests as f64, "mJ", source));
    }
    out
}
