//! `[device.sim]`: a simulated phone's parameters, each overriding `SimParams::defaults`.

use std::time::Duration;

use crate::config::lab::read_device::platform_from;
use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::Table;
use crate::config::{Platform, SimParams};

const SIM_KEYS: &[&str] = &[
    "emulates",
    "seed",
    "battery_mah",
    "battery_start_pct",
    "voltage_v",
    "base_mw",
    "screen_mw_max",
    "cpu_mw_per_pct",
    "wakeup_mj",
    "request_mj",
    "radio_tail_mw",
    "radio_tail",
    "charge_ma",
    "ambient_c",
    "thermal_c_per_w",
    "thermal_tau",
    "device_effect_sd",
    "trial_noise_sd",
    "brightness_pct",
    "usb_only",
    "usb_serial",
    "standin_hub",
    "battery_health_pct",
    "cycle_count",
    "faults",
];
const FAULT_KEYS: &[&str] =
    &["disconnect", "reconnect_after", "brightness_reset", "charging_during_soak", "stays_lost"];

fn non_negative(v: f64) -> bool {
    v >= 0.0
}
fn positive(v: f64) -> bool {
    v > 0.0
}
fn percent(v: f64) -> bool {
    (0.0..=100.0).contains(&v)
}
fn any(_: f64) -> bool {
    true
}

/// Overrides `slot` with the number at `key`, when present and allowed.
fn number(t: &Table, p: &mut Problems, key: &str, slot: &mut f64, ok: fn(f64) -> bool, rule: &str) {
    if let Some(v) = t.get(key).and_then(|f| f.number_where(p, ok, rule)) {
        *slot = v;
    }
}

/// Overrides `slot` with the fraction (`0.02` or `"2%"`) at `key`, when present and in 0..=1.
fn fraction(t: &Table, p: &mut Problems, key: &str, slot: &mut f64) {
    if let Some(v) = t.get(key).and_then(|f| f.fraction_in(p, 0.0, 1.0, false)) {
        *slot = v;
    }
}

fn duration(t: &Table, p: &mut Problems, key: &str, slot: &mut Duration, positive: bool) {
    let v = t.get(key).and_then(|f| if positive { f.positive_duration(p) } else { f.duration(p) });
    if let Some(v) = v {
        *slot = v;
    }
}

/// Reads `[device.sim]`; `None` after reporting when anything is wrong.
pub(crate) fn read_sim(t: &Table, p: &mut Problems) -> Option<SimParams> {
    let before = p.len();
    t.check_keys(p, SIM_KEYS);
    let emulates = t
        .required(p, "emulates", "emulates = \"ios\"")
        .and_then(|f| f.one_of(p, &["ios", "android"]))
        .and_then(platform_from);
    // Without a valid `emulates` the other keys are still checked, against iOS defaults.
    let mut s = SimParams::defaults(emulates.unwrap_or(Platform::Ios));

    if let Some(v) = t.get("seed").and_then(|f| f.integer_in(p, 0, i64::MAX)) {
        s.seed = v as u64;
    }
    number(t, p, "battery_mah", &mut s.battery_mah, positive, "greater than 0");
    number(
        t,
        p,
        "battery_start_pct",
        &mut s.battery_start_pct,
        |v| v > 0.0 && v <= 100.0,
        "greater than 0 and at most 100",
    );
    number(t, p, "voltage_v", &mut s.voltage_v, positive, "greater than 0");
    number(t, p, "base_mw", &mut s.base_mw, non_negative, "≥ 0");
    number(t, p, "screen_mw_max", &mut s.screen_mw_max, non_negative, "≥ 0");
    number(t, p, "cpu_mw_per_pct", &mut s.cpu_mw_per_pct, non_negative, "≥ 0");
    number(t, p, "wakeup_mj", &mut s.wakeup_mj, non_negative, "≥ 0");
    number(t, p, "request_mj", &mut s.request_mj, non_negative, "≥ 0");
    number(t, p, "radio_tail_mw", &mut s.radio_tail_mw, non_negative, "≥ 0");
    duration(t, p, "radio_tail", &mut s.radio_tail, false);
    number(t, p, "charge_ma", &mut s.charge_ma, non_negative, "≥ 0");
    number(t, p, "ambient_c", &mut s.ambient_c, any, "a number");
    number(t, p, "thermal_c_per_w", &mut s.thermal_c_per_w, non_negative, "≥ 0");
    // The thermal model divides by the time constant.
    duration(t, p, "thermal_tau", &mut s.thermal_tau, true);
    fraction(t, p, "device_effect_sd", &mut s.device_effect_sd);
    fraction(t, p, "trial_noise_sd", &mut s.trial_noise_sd);
    number(t, p, "brightness_pct", &mut s.brightness_pct, percent, "between 0 and 100");
    if let Some(v) = t.get("usb_only").and_then(|f| f.bool(p)) {
        s.usb_only = v;
    }
    s.usb_serial = t.get("usb_serial").and_then(|f| f.text(p));
    if let Some(v) = t.get("standin_hub").and_then(|f| f.bool(p)) {
        s.standin_hub = v;
    }
    number(
        t,
        p,
        "battery_health_pct",
        &mut s.battery_health_pct,
        |v| v > 0.0 && v <= 100.0,
        "greater than 0 and at most 100",
    );
    if let Some(v) = t.get("cycle_count").and_then(|f| f.integer_in(p, 0, i64::from(u32::MAX))) {
        s.cycle_count = v as u32;
    }

    if let Some(ft) = t.get("faults").and_then(|f| f.table(p)) {
        ft.check_keys(p, FAULT_KEYS);
        fraction(&ft, p, "disconnect", &mut s.faults.disconnect);
        duration(&ft, p, "reconnect_after", &mut s.faults.reconnect_after, false);
        fraction(&ft, p, "brightness_reset", &mut s.faults.brightness_reset);
        fraction(&ft, p, "charging_during_soak", &mut s.faults.charging_during_soak);
        fraction(&ft, p, "stays_lost", &mut s.faults.stays_lost);
    }

    (emulates.is_some() && p.len() == before).then_some(s)
}
