//! The runbook's smaller sections: `[workload]`, `[endpoint]`, `[preconditions]`,
//! `[metrics]`, `[statistics]`, `[timeouts]` and `[monitor]`. Each is optional and has defaults.

use std::time::Duration;

use crate::config::syntax::problems::Problems;
use crate::config::syntax::suggest::fix_for_unknown;
use crate::config::syntax::table::{Field, Table};
use crate::config::{EndpointSettings, MonitorSettings, PhaseTimeouts, Preconditions, StatsSettings, Workload};
use crate::measure::{KNOWN_METRICS, RAIL_ENERGY_PREFIX, is_known_metric};
use crate::text::duration;

const WORKLOAD_KEYS: &[&str] = &["request_interval", "request_tolerance"];
const MONITOR_KEYS: &[&str] = &["warmup", "idle"];
const PRECONDITION_KEYS: &[&str] = &[
    "brightness",
    "bluetooth",
    "wifi",
    "low_power",
    "battery_min",
    "temperature_max",
    "untethered",
    "app_foreground",
    "load_max",
    "ac_power",
    "auto_fix",
];
const ENDPOINT_KEYS: &[&str] = &["bind", "status", "body_bytes", "cache_control"];
/// Largest endpoint body: big enough for any realistic API answer, small enough to stay in memory.
const MAX_BODY_BYTES: i64 = 16 * 1024 * 1024;
const METRICS_KEYS: &[&str] = &["collect"];
const STATISTICS_KEYS: &[&str] = &["alpha", "practical_threshold", "confidence", "gating"];
const TIMEOUT_KEYS: &[&str] = &["prepare", "gate", "launch", "tether", "collect", "reconnect", "operator"];

/// Default allowed gap between the requests the workload implies and those counted.
const DEFAULT_REQUEST_TOLERANCE: f64 = 0.02;

fn section<'a>(f: Option<Field<'a>>, p: &mut Problems, keys: &[&str]) -> Option<Table<'a>> {
    let t = f?.table(p)?;
    t.check_keys(p, keys);
    Some(t)
}

pub(crate) fn read_workload(f: Option<Field>, p: &mut Problems) -> Workload {
    let mut w = Workload { request_interval: None, request_tolerance: DEFAULT_REQUEST_TOLERANCE };
    if let Some(t) = section(f, p, WORKLOAD_KEYS) {
        w.request_interval = t.get("request_interval").and_then(|f| f.positive_duration(p));
        if let Some(v) = t.get("request_tolerance").and_then(|f| f.fraction_in(p, 0.0, 1.0, false)) {
            w.request_tolerance = v;
        }
    }
    w
}

pub(crate) fn read_monitor_settings(f: Option<Field>, p: &mut Problems, soak: Duration) -> MonitorSettings {
    let mut m = MonitorSettings::default();
    if let Some(t) = section(f, p, MONITOR_KEYS) {
        if let Some(f) = t.get("warmup")
            && let Some(w) = f.duration(p)
        {
            if w >= soak && !soak.is_zero() {
                f.problem(
                    p,
                    format!("a warm-up of {} leaves nothing of the {} soak", duration::exact(w), duration::exact(soak)),
                    "make `warmup` shorter than the runbook's `duration`",
                );
            } else {
                m.warmup = w;
            }
        }
        m.idle = t.get("idle").and_then(|f| f.positive_duration(p));
    }
    m
}

pub(crate) fn read_preconditions(f: Option<Field>, p: &mut Problems) -> Preconditions {
    let mut c = Preconditions { untethered: true, app_foreground: true, auto_fix: true, ..Preconditions::default() };
    let Some(t) = section(f, p, PRECONDITION_KEYS) else {
        return c;
    };
    c.brightness = t.get("brightness").and_then(|f| read_range(&f, p));
    c.bluetooth = t.get("bluetooth").and_then(|f| f.bool(p));
    c.wifi = t.get("wifi").and_then(|f| f.bool(p));
    c.low_power = t.get("low_power").and_then(|f| f.bool(p));
    c.battery_min = t
        .get("battery_min")
        .and_then(|f| f.number_where(p, |v| (0.0..=100.0).contains(&v), "between 0 and 100 (percent)"));
    c.temperature_max = t.get("temperature_max").and_then(|f| f.number(p));
    if let Some(v) = t.get("untethered").and_then(|f| f.bool(p)) {
        c.untethered = v;
    }
    if let Some(v) = t.get("app_foreground").and_then(|f| f.bool(p)) {
        c.app_foreground = v;
    }
    c.load_max = t.get("load_max").and_then(|f| f.number_where(p, |v| v > 0.0, "> 0 (a 1-minute load average)"));
    c.ac_power = t.get("ac_power").and_then(|f| f.bool(p));
    if let Some(v) = t.get("auto_fix").and_then(|f| f.bool(p)) {
        c.auto_fix = v;
    }
    c
}

pub(crate) fn read_endpoint(f: Option<Field>, p: &mut Problems) -> EndpointSettings {
    let mut e = EndpointSettings::default();
    let Some(t) = section(f, p, ENDPOINT_KEYS) else {
        return e;
    };
    if let Some(bf) = t.get("bind")
        && let Some(text) = bf.str(p)
    {
        match text.parse() {
            Ok(addr) => e.bind = addr,
            Err(_) => bf.problem(
                p,
                format!("\"{text}\" is not an IP address and port"),
                "write `bind = \"127.0.0.1:0\"` (port 0 picks a free port; `0.0.0.0:8080` listens on every interface)",
            ),
        }
    }
    if let Some(v) = t.get("status").and_then(|f| f.integer_in(p, 200, 599)) {
        e.status = v as u16;
    }
    if let Some(v) = t.get("body_bytes").and_then(|f| f.integer_in(p, 0, MAX_BODY_BYTES)) {
        e.body_bytes = v as u64;
    }
    if let Some(cf) = t.get("cache_control")
        && let Some(text) = cf.text(p)
    {
        // What an HTTP header value may hold (RFC 9110 §5.5): visible ASCII, spaces and tabs.
        if text.chars().all(|c| c == ' ' || c == '\t' || c.is_ascii_graphic()) {
            e.cache_control = Some(text);
        } else {
            cf.problem(
                p,
                "is not a valid header value (only visible ASCII characters and spaces)",
                "write a Cache-Control value such as `cache_control = \"max-age=60\"` or `\"no-store\"`",
            );
        }
    }
    e
}

/// `[min, max]` in percent, 0 ≤ min ≤ max ≤ 100.
fn read_range(f: &Field, p: &mut Problems) -> Option<(f64, f64)> {
    let fix = format!("write `{} = [40, 60]` (minimum and maximum percent, 0 to 100)", f.leaf);
    let Some(a) = f.item.as_array().filter(|a| a.len() == 2) else {
        f.wrong_type(p, "a list of two numbers [min, max]", fix);
        return None;
    };
    let mut bounds = [0.0; 2];
    let mut ok = true;
    for (i, v) in a.iter().enumerate() {
        let key = format!("{}[{i}]", f.path);
        let n = v.as_integer().map(|x| x as f64).or_else(|| v.as_float());
        match n {
            Some(n) if (0.0..=100.0).contains(&n) => bounds[i] = n,
            Some(n) => {
                p.push(v.span(), &key, format!("must be between 0 and 100 (percent), got {n}"), fix.clone());
                ok = false;
            }
            None => {
                p.push(v.span(), &key, format!("expected a number, found {}", v.type_name()), fix.clone());
                ok = false;
            }
        }
    }
    if ok && bounds[0] > bounds[1] {
        f.problem(
            p,
            format!("minimum {} is above maximum {}", bounds[0], bounds[1]),
            format!("write `{} = [{}, {}]`", f.leaf, bounds[1], bounds[0]),
        );
        return None;
    }
    ok.then_some((bounds[0], bounds[1]))
}

/// `collect = [...]`: known metric names, each once. Absent means everything.
pub(crate) fn read_metrics(f: Option<Field>, p: &mut Problems) -> Vec<String> {
    let Some(t) = section(f, p, METRICS_KEYS) else {
        return Vec::new();
    };
    t.get("collect").map(|f| read_metric_list(&f, p)).unwrap_or_default()
}

/// A list of known metric names, each once.
fn read_metric_list(f: &Field, p: &mut Problems) -> Vec<String> {
    let Some(list) = f.strings(p) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for (i, (m, span)) in list.into_iter().enumerate() {
        let key = format!("{}[{i}]", f.path);
        if m.starts_with(RAIL_ENERGY_PREFIX) && !is_known_metric(&m) {
            p.push(
                span,
                &key,
                format!("metric `{m}` names no power rail"),
                format!(
                    "write the rail's name as the phone's Perfetto trace gives it after `{RAIL_ENERGY_PREFIX}`, \
                     e.g. `{RAIL_ENERGY_PREFIX}S4M_VDD_CPUCL0` (`lab import perfetto TRACE` prints the rail metrics of a trace)"
                ),
            );
        } else if !is_known_metric(&m) {
            p.push(span, &key, format!("unknown metric `{m}`"), fix_for_unknown(&m, KNOWN_METRICS, "metrics"));
        } else if out.contains(&m) {
            p.push(span, &key, format!("metric `{m}` is listed twice"), "list every metric once");
        } else {
            out.push(m);
        }
    }
    out
}

/// `[statistics]`. `collected` is the `[metrics] collect` list (empty: everything).
/// Without `gating`, the default family keeps only the metrics that are collected; a
/// `gating` list must name collected metrics.
pub(crate) fn read_statistics(f: Option<Field>, p: &mut Problems, collected: &[String]) -> StatsSettings {
    let mut s = StatsSettings::default();
    if !collected.is_empty() {
        s.gating.retain(|m| collected.contains(m));
    }
    if let Some(t) = section(f, p, STATISTICS_KEYS) {
        if let Some(gf) = t.get("gating") {
            let gating = read_metric_list(&gf, p);
            if gf.item.as_array().is_some_and(|a| a.is_empty()) {
                gf.problem(
                    p,
                    "the gating family is empty, so no comparison could ever find a regression",
                    "name at least one metric, e.g. `gating = [\"energy_level\", \"cpu_pct\"]`, or remove the key for the default",
                );
            }
            for m in gating.iter().filter(|m| !collected.is_empty() && !collected.contains(m)) {
                gf.problem(
                    p,
                    format!("gating metric `{m}` is not in `[metrics] collect`"),
                    format!("add `{m}` to `[metrics] collect`, or remove it from `gating`"),
                );
            }
            s.gating = gating;
        }
        if let Some(v) = t.get("alpha").and_then(|f| f.fraction_in(p, 0.0, 1.0, true)) {
            s.alpha = v;
        }
        if let Some(v) = t.get("practical_threshold").and_then(|f| f.fraction_in(p, 0.0, 1.0, false)) {
            s.practical_threshold = v;
        }
        if let Some(v) = t.get("confidence").and_then(|f| f.fraction_in(p, 0.0, 1.0, true)) {
            s.confidence = v;
        }
    }
    s
}

pub(crate) fn read_timeouts(f: Option<Field>, p: &mut Problems) -> PhaseTimeouts {
    let mut out = PhaseTimeouts::default();
    if let Some(t) = section(f, p, TIMEOUT_KEYS) {
        let slots: [(&str, &mut Duration); 7] = [
            ("prepare", &mut out.prepare),
            ("gate", &mut out.gate),
            ("launch", &mut out.launch),
            ("tether", &mut out.tether),
            ("collect", &mut out.collect),
            ("reconnect", &mut out.reconnect),
            ("operator", &mut out.operator),
        ];
        for (key, slot) in slots {
            if let Some(v) = t.get(key).and_then(|f| f.positive_duration(p)) {
                *slot = v;
            }
        }
    }
    out
}
