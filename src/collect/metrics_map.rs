//! From parsed device outputs to the lab's measurements (metric, value, unit, source).
//!
//! The source string says what a value came from, so a power-profile *estimate* and a
//! fuel-gauge *measurement* are never pooled: estimates also get their own metric names
//! (`app_estimated_mah`, `estimated_charge_mah`), and `charge_used_mah` is only ever a
//! measured charge (coulomb counter or gauge capacity difference).

use super::android::battery::BatteryService;
use super::android::batterystats_checkin::{AppUsage, Checkin};
use super::android::bluetooth::BluetoothManager;
use super::android::cpuinfo::CpuInfo;
use super::android::dumpsys_wifi::DumpsysWifi;
use super::android::history_text::{BatteryHistoryText, DischargeSummary};
use super::android::meminfo::MemInfo;
use super::android::perfetto::{PowerTrace, SRC_PERFETTO_BATTERY};
use super::android::thermal::ThermalService;
use super::android::wifi_status::WifiStatus;
use super::ios::battery::IosBattery;
use super::linux::proc_stat::ProcStat;
use crate::measure::Measurement;

pub const SRC_PWI: &str = "batterystats pwi estimate";
pub const SRC_PWS: &str = "batterystats pws estimate";
pub const SRC_DC_COULOMB: &str = "batterystats dc coulomb counter";
pub const SRC_DC_LEVEL: &str = "batterystats dc level drop";
pub const SRC_CPU: &str = "batterystats cpu";
pub const SRC_PR: &str = "batterystats pr (sum of processes)";
pub const SRC_NT: &str = "batterystats nt";
pub const SRC_WL: &str = "batterystats wl partial";
pub const SRC_MISC: &str = "batterystats m";
pub const SRC_HISTORY_LEVELS: &str = "batterystats history levels";
pub const SRC_BATTERY: &str = "dumpsys battery";
pub const SRC_BATTERY_LEVEL: &str = "dumpsys battery level";
pub const SRC_BATTERY_COUNTER: &str = "dumpsys battery charge counter";
pub const SRC_THERMAL: &str = "dumpsys thermalservice";
pub const SRC_MEMINFO: &str = "dumpsys meminfo TOTAL PSS";
pub const SRC_MEMINFO_RSS: &str = "dumpsys meminfo TOTAL RSS";
pub const SRC_CPUINFO: &str = "dumpsys cpuinfo";
pub const SRC_PROC_STAT: &str = "/proc/<pid>/stat";
pub const SRC_WIFI_STATUS: &str = "cmd wifi status";
pub const SRC_DUMPSYS_WIFI: &str = "dumpsys wifi supplicant events";
pub const SRC_BLUETOOTH: &str = "dumpsys bluetooth_manager";
pub const SRC_REGISTRY: &str = "battery registry";
pub const SRC_REGISTRY_RAW: &str = "battery registry raw capacity";
pub const SRC_REGISTRY_LEVEL: &str = "battery registry level";
pub const SRC_PERFETTO_RAILS: &str = "perfetto power rails";
pub const SRC_PERFETTO_COUNTER: &str = "perfetto battery charge counter";

/// The prefix of a rail's energy metric: `rail_energy_mj.<rail name>`, one metric per rail
/// (rail names differ per phone; runbooks name them by this prefix).
use crate::measure::RAIL_ENERGY_PREFIX;

fn m(metric: &str, value: f64, unit: &str, source: &str) -> Measurement {
    Measurement::new(metric, value, unit, source)
}

/// Device-wide figures of a checkin, and the app's when one is given.
pub fn checkin(c: &Checkin, app: Option<&AppUsage>) -> Vec<Measurement> {
    let mut out = Vec::new();
    if let Some(d) = &c.discharge {
        out.push(m("battery_drop_pct", d.high_pct as f64, "%", SRC_DC_LEVEL));
        // 0 mAh means the fuel gauge has no coulomb counter, not that nothing was used.
        if let Some(mah) = d.total_mah.filter(|x| *x > 0.0) {
            out.push(m("charge_used_mah", mah, "mAh", SRC_DC_COULOMB));
        }
    }
    if let Some(p) = &c.power_summary {
        out.push(m("estimated_charge_mah", p.computed_mah, "mAh", SRC_PWS));
    }
    if let Some(misc) = &c.misc {
        out.push(m("screen_on_ms", misc.screen_on_ms as f64, "ms", SRC_MISC));
    }
    if let Some(a) = app {
        if let Some(mah) = a.estimated_mah {
            out.push(m("app_estimated_mah", mah, "mAh", SRC_PWI));
        }
        if let (Some(u), Some(s)) = (a.cpu_user_ms, a.cpu_system_ms) {
            let src = if a.cpu_source == Some("cpu") { SRC_CPU } else { SRC_PR };
            out.push(m("cpu_time_ms", u as f64 + s as f64, "ms", src));
            out.push(m("cpu_user_ms", u as f64, "ms", src));
            out.push(m("cpu_system_ms", s as f64, "ms", src));
        }
        if let Some(n) = &a.network {
            out.push(m("net_rx_bytes", n.rx_bytes() as f64, "bytes", SRC_NT));
            out.push(m("net_tx_bytes", n.tx_bytes() as f64, "bytes", SRC_NT));
            out.push(m("net_rx_packets", n.rx_packets() as f64, "packets", SRC_NT));
            out.push(m("net_tx_packets", n.tx_packets() as f64, "packets", SRC_NT));
        }
        out.push(m("wakelock_ms", a.wakelock_partial_ms as f64, "ms", SRC_WL));
    }
    out
}

/// The level drop of a human-readable battery history.
pub fn history_text(h: &BatteryHistoryText) -> Vec<Measurement> {
    match &h.discharge {
        DischargeSummary::NoDischarge => vec![m("battery_drop_pct", 0.0, "%", SRC_HISTORY_LEVELS)],
        DischargeSummary::Discharged { dropped_pct, ms_per_pct, .. } => vec![
            m("battery_drop_pct", *dropped_pct as f64, "%", SRC_HISTORY_LEVELS),
            m("ms_per_pct", *ms_per_pct, "ms/%", SRC_HISTORY_LEVELS),
        ],
    }
}

/// One `dumpsys battery` snapshot: state, not a trial's cost.
pub fn android_battery(b: &BatteryService) -> Vec<Measurement> {
    let mut out = vec![m("battery_level_pct", b.level_pct, "%", SRC_BATTERY)];
    if let Some(t) = b.temperature_c {
        out.push(m("battery_temp_c", t, "°C", SRC_BATTERY));
    }
    if let Some(v) = b.voltage_mv {
        out.push(m("battery_voltage_mv", v as f64, "mV", SRC_BATTERY));
    }
    if let Some(c) = b.charge_counter_mah() {
        out.push(m("charge_counter_mah", c, "mAh", SRC_BATTERY));
    }
    out
}

/// Two `dumpsys battery` snapshots (before and after a trial): what the trial used.
pub fn android_battery_delta(before: &BatteryService, after: &BatteryService) -> Vec<Measurement> {
    let mut out = vec![m("battery_drop_pct", before.level_pct - after.level_pct, "%", SRC_BATTERY_LEVEL)];
    // Subtract the µAh integers, then scale: exact where mAh floats would round.
    if let (Some(a), Some(b)) = (before.charge_counter_uah, after.charge_counter_uah)
        && a > 0
        && b > 0
    {
        out.push(m("charge_used_mah", a.saturating_sub(b) as f64 / 1000.0, "mAh", SRC_BATTERY_COUNTER));
    }
    if let Some(t) = after.temperature_c {
        out.push(m("battery_temp_c", t, "°C", SRC_BATTERY));
    }
    out
}

/// A Perfetto `android.power` trace over a trial: energy per rail (last − first of each
/// rail's counter), and the battery's level drop and charge used over the trace.
pub fn perfetto(t: &PowerTrace) -> Vec<Measurement> {
    // µWs = µJ, so mJ is µWs / 1000.
    let mut out: Vec<Measurement> = t
        .energy_per_rail_uws()
        .into_iter()
        .map(|(rail, uws)| m(&format!("{RAIL_ENERGY_PREFIX}{rail}"), uws as f64 / 1000.0, "mJ", SRC_PERFETTO_RAILS))
        .collect();
    let pct: Vec<f32> = t.battery.iter().filter_map(|b| b.capacity_percent).collect();
    if let (Some(first), Some(last)) = (pct.first(), pct.last())
        && pct.len() > 1
    {
        out.push(m("battery_drop_pct", f64::from(first - last), "%", SRC_PERFETTO_BATTERY));
    }
    // 0 or less means the gauge has no coulomb counter, as in `dumpsys battery`.
    let uah: Vec<i64> = t.battery.iter().filter_map(|b| b.charge_counter_uah).filter(|c| *c > 0).collect();
    if let (Some(first), Some(last)) = (uah.first(), uah.last())
        && uah.len() > 1
    {
        out.push(m("charge_used_mah", first.saturating_sub(*last) as f64 / 1000.0, "mAh", SRC_PERFETTO_COUNTER));
    }
    out
}

/// One battery-registry snapshot.
pub fn ios_battery(r: &IosBattery) -> Vec<Measurement> {
    let mut out = Vec::new();
    if let Some(l) = r.level_pct {
        out.push(m("battery_level_pct", l, "%", SRC_REGISTRY));
    }
    if let Some(c) = r.raw_current_capacity_mah {
        out.push(m("raw_capacity_mah", c as f64, "mAh", SRC_REGISTRY_RAW));
    }
    if let Some(t) = r.temperature_c {
        out.push(m("battery_temp_c", t, "°C", SRC_REGISTRY));
    }
    if let Some(v) = r.voltage_mv {
        out.push(m("battery_voltage_mv", v as f64, "mV", SRC_REGISTRY));
    }
    if let Some(i) = r.instant_current_ma {
        out.push(m("battery_current_ma", i as f64, "mA", SRC_REGISTRY));
    }
    if let Some(h) = r.health_pct {
        out.push(m("battery_health_pct", h, "%", SRC_REGISTRY));
    }
    if let Some(c) = r.cycle_count {
        out.push(m("cycle_count", c as f64, "count", SRC_REGISTRY));
    }
    out
}

/// Two registry snapshots: the raw capacity difference is the measured charge used.
pub fn ios_battery_delta(before: &IosBattery, after: &IosBattery) -> Vec<Measurement> {
    let mut out = Vec::new();
    if let (Some(a), Some(b)) = (before.level_pct, after.level_pct) {
        out.push(m("battery_drop_pct", a - b, "%", SRC_REGISTRY_LEVEL));
    }
    if let (Some(a), Some(b)) = (before.raw_current_capacity_mah, after.raw_current_capacity_mah) {
        out.push(m("charge_used_mah", a as f64 - b as f64, "mAh", SRC_REGISTRY_RAW));
    }
    if let Some(t) = after.temperature_c {
        out.push(m("battery_temp_c", t, "°C", SRC_REGISTRY));
    }
    out
}

pub fn thermal(t: &ThermalService) -> Vec<Measurement> {
    let mut out = vec![m("thermal_status", t.status as f64, "level", SRC_THERMAL)];
    for (metric, kind) in [("battery_temp_c", "BATTERY"), ("skin_temp_c", "SKIN"), ("cpu_temp_c", "CPU")] {
        if let Some(v) = t.max_of_type(kind) {
            out.push(m(metric, v, "°C", SRC_THERMAL));
        }
    }
    out
}

/// PSS in MB (KB / 1024), like the simulator's `memory_mb`.
pub fn meminfo(mi: &MemInfo) -> Vec<Measurement> {
    let mut out = vec![m("memory_mb", mi.total_pss_kb() as f64 / 1024.0, "MB", SRC_MEMINFO)];
    if let Some(rss) = mi.total_rss_kb() {
        out.push(m("memory_rss_mb", rss as f64 / 1024.0, "MB", SRC_MEMINFO_RSS));
    }
    out
}

/// `cpuinfo` shares are of all CPUs together, so they get their own metric (`cpu_pct` is % of
/// one core elsewhere).
pub fn cpuinfo(c: &CpuInfo, package: Option<&str>) -> Vec<Measurement> {
    let value = match package {
        Some(p) => c.package_pct(p),
        None => c.total_pct,
    };
    value.map(|v| m("cpu_load_pct", v, "% of all CPUs", SRC_CPUINFO)).into_iter().collect()
}

pub fn proc_stat(p: &ProcStat, ticks_per_s: u64) -> Vec<Measurement> {
    vec![m("cpu_time_ms", p.cpu_ms(ticks_per_s), "ms", SRC_PROC_STAT)]
}

/// CPU time between two `/proc/<pid>/stat` reads of the same process.
pub fn proc_stat_delta(before: &ProcStat, after: &ProcStat, ticks_per_s: u64) -> Vec<Measurement> {
    vec![m("cpu_time_ms", after.cpu_ms(ticks_per_s) - before.cpu_ms(ticks_per_s), "ms", SRC_PROC_STAT)]
}

pub fn wifi_status(w: &WifiStatus) -> Vec<Measurement> {
    let mut out = Vec::new();
    if let Some(e) = w.enabled {
        out.push(m("wifi_on", f64::from(u8::from(e)), "bool", SRC_WIFI_STATUS));
    }
    if let Some(i) = &w.info {
        if let Some(r) = i.rssi_dbm {
            out.push(m("wifi_rssi_dbm", r as f64, "dBm", SRC_WIFI_STATUS));
        }
        if let Some(s) = i.link_speed_mbps {
            out.push(m("wifi_link_mbps", s as f64, "Mbps", SRC_WIFI_STATUS));
        }
    }
    out
}

pub fn dumpsys_wifi(w: &DumpsysWifi) -> Vec<Measurement> {
    vec![
        m("wifi_disconnects", w.disconnects as f64, "count", SRC_DUMPSYS_WIFI),
        m("wifi_scans", w.scans as f64, "count", SRC_DUMPSYS_WIFI),
        m("wifi_associations", w.associations as f64, "count", SRC_DUMPSYS_WIFI),
    ]
}

pub fn bluetooth(b: &BluetoothManager) -> Vec<Measurement> {
    vec![m("bluetooth_on", f64::from(u8::from(b.enabled)), "bool", SRC_BLUETOOTH)]
}

const SRC_POWERLOG: &str = "iOS powerlog (the phone's own record, read after re-tether)";
const SRC_POWERLOG_RAW: &str = "iOS powerlog AppleRawCurrentCapacity at the soak's ends";

/// A powerlog's soak window: level drop, charge used from the raw capacity, energy with the
/// mean voltage, average power, and Apple's per-node estimates labelled as such.
pub fn powerlog(s: &super::ios::powerlog::SoakLog) -> Vec<Measurement> {
    let mut out = Vec::new();
    if let (Some(a), Some(b)) = (s.level_start_pct, s.level_end_pct) {
        out.push(m("battery_drop_pct", a - b, "%", SRC_POWERLOG));
    }
    if let Some(c) = s.charge_used_mah {
        out.push(m("charge_used_mah", c, "mAh", SRC_POWERLOG_RAW));
    }
    if let Some(e) = s.energy_j {
        out.push(m("energy_j", e, "J", SRC_POWERLOG_RAW));
        let secs = s.to - s.from;
        if secs > 0.0 {
            out.push(m("avg_power_mw", e / secs * 1000.0, "mW", SRC_POWERLOG_RAW));
        }
    }
    out
}
