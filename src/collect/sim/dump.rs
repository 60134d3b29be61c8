//! Parser of the simulated phone's raw dump (`sim-energy.log`; format in docs/sim.md).
//!
//! A pure function of the text: every problem is an error naming the line, never a
//! panic, so a truncated or foreign file is reported rather than half-read.

use crate::measure::{BATTERY_PCT, Measurement, Series};

/// First line of every dump; the number is the format version.
pub const MAGIC: &str = "lab-sim-energy-log 1";

pub const SOURCE_BATTERY: &str = "sim model (battery gauge)";
pub const SOURCE_ENERGY: &str = "sim model (energy gauge)";
pub const SOURCE_SAMPLES: &str = "sim model (CPU and memory samples)";
pub const SOURCE_REQUESTS: &str = "sim model (app request counter)";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based; one past the last line when the text ends too early.
    pub line: usize,
    pub message: String,
}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError { line, message: message.into() })
}

/// What a dump says about one trial.
#[derive(Debug, Clone, PartialEq)]
pub struct SimDumpSummary {
    pub device: String,
    /// `ios` or `android`.
    pub emulates: String,
    pub app: String,
    pub trial: String,
    pub battery_mah: f64,
    pub voltage_v: f64,
    /// Length of the measurement window (s).
    pub duration_s: f64,
    /// Charge counter drop over the window (mAh; negative if it charged).
    pub charge_used_mah: f64,
    /// `charge_used_mah / battery_mah · 100`.
    pub battery_drop_pct: f64,
    /// `charge_used_mah · voltage_v / (duration_s / 3600)`.
    pub avg_power_mw: f64,
    /// Duration-weighted means of the samples; `None` without samples.
    pub energy_level: Option<f64>,
    pub cpu_pct: Option<f64>,
    pub memory_mb: Option<f64>,
    pub requests_sent: u64,
    pub requests_cached: u64,
    /// Time on external power according to the battery timeline (s).
    pub charging_s: f64,
    /// A crash event, or the app was not running when the window closed.
    pub app_died: bool,
    /// The lab lost contact with the phone during the window.
    pub lost_contact: bool,
    /// The screen brightness changed by itself.
    pub brightness_changed: bool,
    pub battery_records: usize,
    pub samples: usize,
    /// The battery lines as (seconds since launch, level in % of capacity), the level from
    /// the charge counter and `battery_mah` (finer than the whole-percent `level=` field).
    pub battery_pct: Vec<(f64, f64)>,
}

impl SimDumpSummary {
    /// The metrics (names and units as the runbooks use them).
    pub fn measurements(&self) -> Vec<Measurement> {
        let mut m = vec![
            Measurement::new("battery_drop_pct", self.battery_drop_pct, "%", SOURCE_BATTERY),
            Measurement::new("charge_used_mah", self.charge_used_mah, "mAh", SOURCE_BATTERY),
            Measurement::new("avg_power_mw", self.avg_power_mw, "mW", SOURCE_BATTERY),
        ];
        if let Some(v) = self.energy_level {
            m.push(Measurement::new("energy_level", v, "level", SOURCE_ENERGY));
        }
        if let Some(v) = self.cpu_pct {
            m.push(Measurement::new("cpu_pct", v, "%", SOURCE_SAMPLES));
        }
        if let Some(v) = self.memory_mb {
            m.push(Measurement::new("memory_mb", v, "MB", SOURCE_SAMPLES));
        }
        m.push(Measurement::new("requests", self.requests_sent as f64, "count", SOURCE_REQUESTS));
        m
    }

    /// The series kept with the attempt: the battery level over the window.
    pub fn series(&self) -> Vec<Series> {
        vec![Series::new(BATTERY_PCT, "%", SOURCE_BATTERY, self.battery_pct.clone())]
    }
}

/// `key=value` fields of one body line.
struct Fields<'a> {
    line: usize,
    kind: &'a str,
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Fields<'a> {
    fn parse(line: usize, kind: &'a str, rest: &'a str) -> Result<Self, ParseError> {
        let mut pairs = Vec::new();
        for tok in rest.split_whitespace() {
            match tok.split_once('=') {
                Some((k, v)) if !k.is_empty() => pairs.push((k, v)),
                _ => {
                    return err(line, format!("{kind} line: `{tok}` is not a key=value field"));
                }
            }
        }
        Ok(Fields { line, kind, pairs })
    }

    fn text(&self, key: &str) -> Result<&'a str, ParseError> {
        match self.pairs.iter().find(|(k, _)| *k == key) {
            Some((_, v)) => Ok(v),
            None => err(self.line, format!("{} line has no `{key}=` field", self.kind)),
        }
    }

    fn num(&self, key: &str) -> Result<f64, ParseError> {
        let v = self.text(key)?;
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => err(self.line, format!("{} line: `{key}={v}` is not a number", self.kind)),
        }
    }

    fn count(&self, key: &str) -> Result<u64, ParseError> {
        let v = self.text(key)?;
        v.parse::<u64>().or_else(|_| err(self.line, format!("{} line: `{key}={v}` is not a whole number", self.kind)))
    }

    fn flag(&self, key: &str) -> Result<bool, ParseError> {
        match self.text(key)? {
            "0" => Ok(false),
            "1" => Ok(true),
            v => err(self.line, format!("{} line: `{key}={v}` must be 0 or 1", self.kind)),
        }
    }
}

struct Battery {
    t: f64,
    charge_mah: f64,
    external_power: bool,
}

struct End {
    line: usize,
    t: f64,
    requests_sent: u64,
    requests_cached: u64,
    app_alive: bool,
}

#[derive(Default)]
struct Header {
    device: Option<String>,
    emulates: Option<String>,
    app: Option<String>,
    trial: Option<String>,
    battery_mah: Option<f64>,
    voltage_v: Option<f64>,
}

fn positive(line: usize, key: &str, v: &str) -> Result<f64, ParseError> {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => err(line, format!("header `{key}` must be a positive number, not `{v}`")),
    }
}

/// Reads a dump. Errors name the line (1-based) and what is wrong with it.
pub fn parse(text: &str) -> Result<SimDumpSummary, ParseError> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim()));
    match lines.next() {
        Some((_, first)) if first == MAGIC => {}
        Some((n, first)) => {
            let shown: String = first.chars().take(40).flat_map(char::escape_debug).collect();
            return err(n, format!("not a lab sim energy log: expected `{MAGIC}`, found `{shown}`"));
        }
        None => return err(1, "empty file: expected a lab sim energy log"),
    }

    let mut header = Header::default();
    let mut in_body = false;
    let mut battery: Vec<Battery> = Vec::new();
    let (mut weight, mut cpu_sum, mut mem_sum, mut energy_sum) = (0.0, 0.0, 0.0, 0.0);
    let (mut samples, mut sample_sent, mut last_sample_t) = (0usize, 0u64, f64::NEG_INFINITY);
    let (mut app_died, mut lost_contact, mut brightness_changed) = (false, false, false);
    let mut last_event_t = f64::NEG_INFINITY;
    let mut end: Option<End> = None;
    let mut last_line = 1;

    for (n, line) in lines {
        last_line = n;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(e) = &end {
            return err(n, format!("text after the `end` line (line {})", e.line));
        }
        let (kind, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        match kind {
            "battery" | "sample" | "event" | "end" => in_body = true,
            _ if in_body => {
                return err(n, format!("unknown line kind `{kind}` (expected battery, sample, event or end)"));
            }
            _ => {
                let value = rest.trim();
                if value.is_empty() {
                    return err(n, format!("header `{kind}` has no value"));
                }
                match kind {
                    "device" => header.device = Some(value.into()),
                    "emulates" => header.emulates = Some(value.into()),
                    "app" => header.app = Some(value.into()),
                    "trial" => header.trial = Some(value.into()),
                    "battery_mah" => header.battery_mah = Some(positive(n, kind, value)?),
                    "voltage_v" => header.voltage_v = Some(positive(n, kind, value)?),
                    // Other header keys (model, os, seed, ...) are informative.
                    _ => {}
                }
                continue;
            }
        }
        let f = Fields::parse(n, kind, rest)?;
        let t = f.num("t")?;
        if t < 0.0 {
            return err(n, format!("{kind} line: `t={t}` is negative"));
        }
        match kind {
            "battery" => {
                if battery.last().is_some_and(|b| t < b.t) {
                    return err(n, "battery line goes back in time");
                }
                let charge_mah = f.num("charge_mah")?;
                let external_power = f.flag("ext")?;
                // Checked for shape even though the summary does not use them.
                f.num("level")?;
                f.num("current_ma")?;
                f.flag("charging")?;
                f.num("temp_c")?;
                battery.push(Battery { t, charge_mah, external_power });
            }
            "sample" => {
                if t <= last_sample_t {
                    return err(n, "sample line does not come after the previous sample");
                }
                last_sample_t = t;
                let dt = f.num("dt")?;
                if dt <= 0.0 {
                    return err(n, format!("sample line: `dt={dt}` must be positive"));
                }
                cpu_sum += dt * f.num("cpu")?;
                mem_sum += dt * f.num("mem_mb")?;
                energy_sum += dt * f.num("energy")?;
                weight += dt;
                sample_sent += f.count("sent")?;
                f.count("cached")?;
                f.count("wakeups")?;
                samples += 1;
            }
            "event" => {
                if t < last_event_t {
                    return err(n, "event line goes back in time");
                }
                last_event_t = t;
                match f.text("kind")? {
                    "crash" => app_died = true,
                    "lost_contact" => lost_contact = true,
                    "brightness" => brightness_changed = true,
                    // external_power and reconnected show in the timeline; newer kinds are tolerated.
                    _ => {}
                }
            }
            _ => {
                end = Some(End {
                    line: n,
                    t,
                    requests_sent: f.count("requests_sent")?,
                    requests_cached: f.count("requests_cached")?,
                    app_alive: f.flag("app_alive")?,
                });
            }
        }
    }

    let Some(end) = end else {
        return err(last_line + 1, "the dump ends without an `end` line (truncated?)");
    };
    let missing = |key: &str| ParseError { line: end.line, message: format!("the header has no `{key}` line") };
    let device = header.device.ok_or_else(|| missing("device"))?;
    let emulates = header.emulates.ok_or_else(|| missing("emulates"))?;
    let app = header.app.ok_or_else(|| missing("app"))?;
    let trial = header.trial.ok_or_else(|| missing("trial"))?;
    let battery_mah = header.battery_mah.ok_or_else(|| missing("battery_mah"))?;
    let voltage_v = header.voltage_v.ok_or_else(|| missing("voltage_v"))?;
    let (Some(first), Some(last)) = (battery.first(), battery.last()) else {
        return err(end.line, "the dump has no battery line");
    };
    if last.t > end.t {
        return err(end.line, format!("`end t={}` is before the last battery line (t={})", end.t, last.t));
    }
    if sample_sent > end.requests_sent {
        return err(
            end.line,
            format!(
                "the samples add up to {sample_sent} requests sent, more than `requests_sent={}`",
                end.requests_sent
            ),
        );
    }

    // Each battery record's power state holds until the next record (or the end).
    let mut charging_s = 0.0;
    for (i, b) in battery.iter().enumerate() {
        let until = battery.get(i + 1).map_or(end.t, |next| next.t);
        if b.external_power {
            charging_s += until - b.t;
        }
    }
    let charge_used_mah = first.charge_mah - last.charge_mah;
    let duration_s = end.t;
    let mean = |sum: f64| (weight > 0.0).then(|| sum / weight);
    Ok(SimDumpSummary {
        device,
        emulates,
        app,
        trial,
        battery_mah,
        voltage_v,
        duration_s,
        charge_used_mah,
        battery_drop_pct: charge_used_mah / battery_mah * 100.0,
        avg_power_mw: if duration_s > 0.0 { charge_used_mah * voltage_v * 3600.0 / duration_s } else { 0.0 },
        energy_level: mean(energy_sum),
        cpu_pct: mean(cpu_sum),
        memory_mb: mean(mem_sum),
        requests_sent: end.requests_sent,
        requests_cached: end.requests_cached,
        charging_s,
        app_died: app_died || !end.app_alive,
        lost_contact,
        brightness_changed,
        battery_records: battery.len(),
        samples,
        battery_pct: battery.iter().map(|b| (b.t, b.charge_mah / battery_mah * 100.0)).collect(),
    })
}
