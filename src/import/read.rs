//! What `lab import KIND FILE…` does before printing: read the files, parse them with the
//! kind's parser and map the result to measurements.
//!
//! Kinds that describe a state (`android-battery`, `ios-battery`, `proc-stat`) take one file
//! (a snapshot) or two (before and after a trial: the difference is the trial's cost).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::kind::ImportKind;
use crate::collect::ParseError;
use crate::collect::android::batterystats_checkin::AppUsage;
use crate::collect::{
    android::battery as android_battery, android::batterystats_checkin, android::bluetooth, android::cpuinfo,
    android::dumpsys_wifi, android::history_text, android::meminfo, android::perfetto, android::thermal,
    android::wifi_status, ios::battery as ios_battery, ios::powerlog, ios::sysdiagnose, linux::proc_stat, metrics_map,
};
use crate::measure::{BATTERY_PCT, Measurement, Series};

#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Pick one app (android-batterystats, android-cpuinfo).
    pub package: Option<String>,
    /// Clock ticks per second for `/proc/<pid>/stat` (`getconf CLK_TCK`; 100 on Linux/Android).
    pub ticks_per_s: u64,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions { package: None, ticks_per_s: 100 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{file}: {source}; fix: pass {expects}, or the kind that matches the file (`lab import --help`)")]
    Parse { file: String, source: ParseError, expects: &'static str },
    #[error("{file}: cannot read it ({source}); fix: check the path and permissions")]
    Read { file: String, source: std::io::Error },
    #[error("{kind} takes {expected}, got {got} file(s); fix: pass {expected}")]
    FileCount { kind: &'static str, expected: &'static str, got: usize },
    #[error("{file}: no package `{package}` in the checkin's `uid` rows; fix: pass one of: {known}")]
    UnknownPackage { file: String, package: String, known: String },
    #[error(
        "{file}: no process of `{package}` in the cpuinfo window; fix: check the package name (processes seen: {known})"
    )]
    NoProcess { file: String, package: String, known: String },
}

/// A parsed import: the parsed values as JSON, and the measurements they map to.
#[derive(Debug, Clone, Serialize)]
pub struct Imported {
    pub kind: ImportKind,
    pub files: Vec<String>,
    pub parsed: serde_json::Value,
    pub metrics: Vec<Measurement>,
    /// Per-app figures (android-batterystats only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apps: Option<Vec<AppUsage>>,
    /// Values over the soak (a powerlog's battery curve), kept when attached as a trial.
    #[serde(skip)]
    pub series: Vec<Series>,
}

fn read(path: &Path) -> Result<Vec<u8>, ImportError> {
    std::fs::read(path).map_err(|source| ImportError::Read { file: path.display().to_string(), source })
}

fn parsed<T>(kind: ImportKind, path: &Path, r: Result<T, ParseError>) -> Result<T, ImportError> {
    r.map_err(|source| ImportError::Parse { file: path.display().to_string(), source, expects: kind.expects() })
}

fn json<T: Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

/// Parses a text file with `parse`, one or two snapshots, and maps them.
fn snapshots<T: Serialize>(
    kind: ImportKind,
    files: &[(PathBuf, Vec<u8>)],
    parse: impl Fn(&[u8]) -> Result<T, ParseError>,
    one: impl Fn(&T) -> Vec<Measurement>,
    two: impl Fn(&T, &T) -> Vec<Measurement>,
) -> Result<(serde_json::Value, Vec<Measurement>), ImportError> {
    let values: Vec<T> = files.iter().map(|(p, b)| parsed(kind, p, parse(b))).collect::<Result<_, _>>()?;
    Ok(match values.as_slice() {
        [a, b] => (serde_json::json!({ "before": json(a), "after": json(b) }), two(a, b)),
        [a] => (json(a), one(a)),
        _ => (serde_json::Value::Null, Vec::new()),
    })
}

fn text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// A powerlog's last unplugged stretch read as the soak; `archive`: the powerlogs of the
/// sysdiagnose it came out of (the newest is read).
fn powerlog_soak(
    kind: ImportKind,
    path: &Path,
    bytes: &[u8],
    archive: Option<Vec<String>>,
    series: &mut Vec<Series>,
) -> Result<(serde_json::Value, Vec<Measurement>), ImportError> {
    let log = parsed(kind, path, powerlog::parse(bytes))?;
    let none = ParseError::Byte {
        offset: 0,
        message: "the phone never was off power in this log: no unplugged stretch to read as a soak".into(),
    };
    let (from, to) = parsed(kind, path, log.last_unplugged().ok_or(none))?;
    let soak = log.soak(from, to);
    let mut parsed = serde_json::json!({
        "battery_rows": log.battery.len(),
        "time_offsets": log.time_offsets,
        "soak": json(&soak),
    });
    if let Some(names) = archive {
        parsed["powerlogs"] = json(&names);
    }
    series.push(Series::new(BATTERY_PCT, "%", "iOS powerlog battery level", soak.series.clone()));
    Ok((parsed, metrics_map::powerlog(&soak)))
}

/// Reads, parses and maps `paths` as `kind`.
pub fn run(kind: ImportKind, paths: &[PathBuf], opts: &ImportOptions) -> Result<Imported, ImportError> {
    let (min, max, expected) =
        if kind.takes_pair() { (1, 2, "one file, or two (before, after)") } else { (1, 1, "one file") };
    if paths.len() < min || paths.len() > max {
        return Err(ImportError::FileCount { kind: kind.name(), expected, got: paths.len() });
    }
    let files: Vec<(PathBuf, Vec<u8>)> =
        paths.iter().map(|p| read(p).map(|b| (p.clone(), b))).collect::<Result<_, _>>()?;
    let (path, bytes) = (&files[0].0, &files[0].1);
    let file = path.display().to_string();
    let pkg = opts.package.as_deref();
    let mut apps = None;
    let mut series = Vec::new();
    let (parsed_json, metrics) = match kind {
        ImportKind::AndroidBatterystats => {
            let c = parsed(kind, path, batterystats_checkin::parse(&text(bytes)))?;
            let app = match pkg {
                Some(p) => Some(c.app(p).ok_or_else(|| ImportError::UnknownPackage {
                    file: file.clone(),
                    package: p.to_string(),
                    known: known_packages(&c),
                })?),
                None => None,
            };
            let metrics = metrics_map::checkin(&c, app.as_ref());
            apps = Some(match app {
                Some(a) => vec![a],
                None => c.apps(),
            });
            (checkin_json(&c), metrics)
        }
        ImportKind::AndroidBatteryHistory => {
            let h = parsed(kind, path, history_text::parse(&text(bytes)))?;
            (json(&h), metrics_map::history_text(&h))
        }
        ImportKind::AndroidBattery => snapshots(
            kind,
            &files,
            |b| android_battery::parse(&text(b)),
            metrics_map::android_battery,
            metrics_map::android_battery_delta,
        )?,
        ImportKind::IosBattery => {
            snapshots(kind, &files, ios_battery::parse, metrics_map::ios_battery, metrics_map::ios_battery_delta)?
        }
        ImportKind::ProcStat => {
            let t = opts.ticks_per_s;
            snapshots(
                kind,
                &files,
                |b| proc_stat::parse(&text(b)),
                |p| metrics_map::proc_stat(p, t),
                |a, b| metrics_map::proc_stat_delta(a, b, t),
            )?
        }
        ImportKind::IosPowerlog => powerlog_soak(kind, path, bytes, None, &mut series)?,
        ImportKind::IosSysdiagnose => {
            let logs = parsed(kind, path, sysdiagnose::powerlogs(bytes.as_slice()))?;
            let names: Vec<String> = logs.iter().map(|l| l.path.clone()).collect();
            let newest = logs.last().map(|l| l.bytes.as_slice()).unwrap_or_default();
            powerlog_soak(kind, path, newest, Some(names), &mut series)?
        }
        ImportKind::Perfetto => {
            let t = parsed(kind, path, perfetto::PowerTrace::parse(bytes))?;
            (json(&t), metrics_map::perfetto(&t))
        }
        ImportKind::AndroidThermal => {
            let t = parsed(kind, path, thermal::parse(&text(bytes)))?;
            (json(&t), metrics_map::thermal(&t))
        }
        ImportKind::AndroidWifiStatus => {
            let w = parsed(kind, path, wifi_status::parse(&text(bytes)))?;
            (json(&w), metrics_map::wifi_status(&w))
        }
        ImportKind::AndroidDumpsysWifi => {
            let w = parsed(kind, path, dumpsys_wifi::parse(&text(bytes)))?;
            (json(&w), metrics_map::dumpsys_wifi(&w))
        }
        ImportKind::AndroidBluetooth => {
            let b = parsed(kind, path, bluetooth::parse(&text(bytes)))?;
            (json(&b), metrics_map::bluetooth(&b))
        }
        ImportKind::AndroidMeminfo => {
            let mi = parsed(kind, path, meminfo::parse(&text(bytes)))?;
            (json(&mi), metrics_map::meminfo(&mi))
        }
        ImportKind::AndroidCpuinfo => {
            let c = parsed(kind, path, cpuinfo::parse(&text(bytes)))?;
            if let Some(p) = pkg
                && c.package_pct(p).is_none()
            {
                let known: Vec<&str> = c.processes.iter().map(|p| p.name.as_str()).take(20).collect();
                return Err(ImportError::NoProcess { file, package: p.to_string(), known: known.join(", ") });
            }
            (json(&c), metrics_map::cpuinfo(&c, pkg))
        }
    };
    Ok(Imported {
        kind,
        files: paths.iter().map(|p| p.display().to_string()).collect(),
        parsed: parsed_json,
        metrics,
        apps,
        series,
    })
}

fn known_packages(c: &batterystats_checkin::Checkin) -> String {
    let mut names: Vec<&str> = c.packages.values().flatten().map(String::as_str).collect();
    names.sort_unstable();
    if names.is_empty() {
        return "(none: the checkin has no `uid` rows)".into();
    }
    let more = names.len().saturating_sub(20);
    let mut s = names.into_iter().take(20).collect::<Vec<_>>().join(", ");
    if more > 0 {
        s.push_str(&format!(" … and {more} more"));
    }
    s
}

/// The checkin summary for `--json`: per-app figures are in `apps`; the raw per-uid rows
/// are left out (they can be tens of thousands of values).
fn checkin_json(c: &batterystats_checkin::Checkin) -> serde_json::Value {
    let device_items: Vec<_> = c.power_items.iter().filter(|p| p.label != "uid").collect();
    let h = &c.history;
    serde_json::json!({
        "checkin_version": c.version,
        "battery": c.battery,
        "discharge": c.discharge,
        "power_summary": c.power_summary,
        "device_power_items": device_items,
        "misc": c.misc,
        "global_network": c.global_network,
        "history": {
            "records": h.records,
            "clock_known": h.clock_known,
            "start_ms": h.start_ms,
            "end_ms": h.end_ms,
            "screen_changes": h.screen.len(),
            "wakelock_slices": h.wakelocks.len(),
            "levels": h.levels,
        },
        "other_rows": c.other_rows,
        "warnings": c.warnings,
    })
}
