//! A runbook file: its top-level keys, then every section, into a validated [`Runbook`].

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::config::runbook::read_builds::read_builds;
use crate::config::runbook::read_configs::read_configs;
use crate::config::runbook::read_sections::{
    read_endpoint, read_metrics, read_monitor_settings, read_preconditions, read_statistics, read_timeouts,
    read_workload,
};
use crate::config::runbook::read_steps::read_steps;
use crate::config::syntax::names::check_name;
use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::{Field, Table};
use crate::config::{AdaptiveRepeats, Lab, OnOffline, Order, Platform, PowerDesign, Runbook, Selector, StopRule};
use crate::stats::sequential::{DEFAULT_LOOKS, MAX_LOOKS};

const ROOT_KEYS: &[&str] = &[
    "name",
    "description",
    "duration",
    "repeats",
    "seed",
    "order",
    "cooldown",
    "retries",
    "on_offline",
    "devices",
    "builds",
    "configs",
    "workload",
    "endpoint",
    "preconditions",
    "metrics",
    "statistics",
    "timeouts",
    "steps",
    "monitor",
];

/// Seed when the runbook gives none (fixed, so a campaign is still reproducible).
pub const DEFAULT_SEED: u64 = 1;
/// Re-runs of an invalid trial when the runbook gives no `retries`.
pub const DEFAULT_RETRIES: u32 = 2;

/// Reads a whole runbook. The result is only meaningful when `p` stays empty.
pub(crate) fn read_runbook(
    root: &Table,
    p: &mut Problems,
    source: &Path,
    text: &str,
    base: &Path,
    lab: &Lab,
) -> Runbook {
    root.check_keys(p, ROOT_KEYS);
    let stem = source.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "my-runbook".into());

    let name = root
        .required(p, "name", &format!("name = \"{stem}\""))
        .and_then(|f| {
            let n = f.text(p)?;
            check_name(p, f.span(), &f.path, "runbook", &n).then_some(n)
        })
        .unwrap_or_default();
    let description = root.get("description").and_then(|f| f.str(p).map(str::to_string)).unwrap_or_default();
    let duration =
        root.required(p, "duration", "duration = \"10m\"").and_then(|f| f.positive_duration(p)).unwrap_or_default();
    let (repeats, adaptive) =
        root.required(p, "repeats", "repeats = 5").map(|f| read_repeats(&f, p)).unwrap_or((1, None));
    let seed = root.get("seed").and_then(|f| f.integer_in(p, 0, i64::MAX)).map_or(DEFAULT_SEED, |v| v as u64);
    let order = match root.get("order").and_then(|f| f.one_of(p, &["balanced", "sequential", "random"])) {
        Some("sequential") => Order::Sequential,
        Some("random") => Order::Random,
        _ => Order::Balanced,
    };
    let cooldown = root.get("cooldown").and_then(|f| f.duration(p)).unwrap_or(Duration::ZERO);
    let retries = root.get("retries").and_then(|f| f.u32_at_least(p, 0)).unwrap_or(DEFAULT_RETRIES);
    let on_offline = match root.get("on_offline").and_then(|f| f.one_of(p, &["wait", "move"])) {
        Some("move") => OnOffline::Move,
        _ => OnOffline::Wait,
    };
    let devices = root
        .required(p, "devices", "devices = [\"tag:phone\"]")
        .map(|f| read_selectors(&f, p, lab))
        .unwrap_or_default();

    let metrics = read_metrics(root.get("metrics"), p);
    let ios_devices = lab.devices.iter().any(|d| d.platform() == Platform::Ios && devices.iter().any(|s| s.matches(d)));
    let builds = read_builds(root.get("builds"), p, base, ios_devices);
    let configs = read_configs(root.get("configs"), p, base);

    Runbook {
        name,
        description,
        source: source.to_path_buf(),
        text: text.to_string(),
        sha256: crate::seed::sha256_hex(text.as_bytes()),
        duration,
        repeats,
        adaptive,
        seed,
        order,
        cooldown,
        retries,
        on_offline,
        devices,
        builds,
        configs,
        workload: read_workload(root.get("workload"), p),
        endpoint: read_endpoint(root.get("endpoint"), p),
        preconditions: read_preconditions(root.get("preconditions"), p),
        statistics: read_statistics(root.get("statistics"), p, &metrics),
        metrics,
        timeouts: read_timeouts(root.get("timeouts"), p),
        steps: read_steps(root.get("steps"), p),
        monitor: read_monitor_settings(root.get("monitor"), p, duration),
    }
}

/// `repeats = 6`, or adaptive: `repeats = { min = 5, max = 30, target_ci = "3%" }` (until
/// precise) or `repeats = { min = 3, max = 30, stop = "decided" }` (until decided).
fn read_repeats(f: &Field, p: &mut Problems) -> (u32, Option<AdaptiveRepeats>) {
    if f.item.as_table_like().is_none() {
        return (f.u32_at_least(p, 1).unwrap_or(1), None);
    }
    let Some(t) = f.table(p) else { return (1, None) };
    t.check_keys(p, &["min", "max", "target_ci", "stop", "power", "looks", "cv"]);
    if let Some(power) = t.get("power") {
        return read_power_design(f, &t, &power, p);
    }
    for key in ["looks", "cv"] {
        if let Some(k) = t.get(key) {
            k.problem(
                p,
                format!("`{key}` without `power`"),
                format!("add `power = 0.9` (a sequential design sized from a power) or remove `{key}`"),
            );
        }
    }
    // Two values per arm are the fewest that have a confidence interval at all.
    let min = t.required(p, "min", "min = 5").and_then(|f| f.u32_at_least(p, 2));
    let max = t.required(p, "max", "max = 30").and_then(|f| f.u32_at_least(p, 2));
    let stop = match t.get("stop") {
        None => Some(StopRule::Precise),
        Some(f) => match f.str(p) {
            None => None,
            Some("precise") => Some(StopRule::Precise),
            Some("decided") => Some(StopRule::Decided),
            Some(other) => {
                f.problem(
                    p,
                    format!("unknown stop rule `{other}`"),
                    "write `stop = \"decided\"` (until every variant is decided) or `stop = \"precise\"` with `target_ci`",
                );
                None
            }
        },
    };
    let target = match (stop, t.get("target_ci")) {
        (Some(StopRule::Decided), Some(f)) => {
            f.problem(
                p,
                "`target_ci` with `stop = \"decided\"`",
                "remove `target_ci` (a sequential campaign stops when decided) or `stop` (to stop when precise)",
            );
            None
        }
        (Some(StopRule::Decided), None) => Some(0.0),
        _ => t.required(p, "target_ci", "target_ci = \"3%\"").and_then(|f| f.fraction_in(p, 0.0, 1.0, true)),
    };
    if let (Some(lo), Some(hi)) = (min, max)
        && hi < lo
    {
        f.problem(
            p,
            format!("max {hi} is below min {lo}"),
            format!("write `max` ≥ `min`, e.g. `max = {}`", lo.max(30)),
        );
        return (lo, None);
    }
    match (min, max, target, stop) {
        (Some(min), Some(max), Some(target_ci), Some(stop)) => {
            (min, Some(AdaptiveRepeats { min, max, target_ci, stop, power: None }))
        }
        (min, ..) => (min.unwrap_or(1), None),
    }
}

/// `repeats = { stop = "decided", power = 0.9, looks = 5, cv = "5%" }`: a sequential
/// design sized from a power; its `min` and `max` are set when it is planned (0 until then).
fn read_power_design(f: &Field, t: &Table, power: &Field, p: &mut Problems) -> (u32, Option<AdaptiveRepeats>) {
    let example = "repeats = { stop = \"decided\", power = 0.9 }";
    let power = power.fraction_in(p, 0.5, 1.0, true);
    let decided = match t.get("stop") {
        None => {
            f.problem(p, "`power` without `stop = \"decided\"`", format!("write `{example}`"));
            false
        }
        Some(stop) => match stop.str(p) {
            Some("decided") => true,
            Some(other) => {
                stop.problem(
                    p,
                    format!("`power` with `stop = \"{other}\"`"),
                    format!("a design sized from a power stops when decided: write `{example}`"),
                );
                false
            }
            None => false,
        },
    };
    for key in ["min", "max", "target_ci"] {
        if let Some(k) = t.get(key) {
            k.problem(
                p,
                format!("`{key}` with `power`: the design sizes its looks and its most trials from the power"),
                format!("remove `{key}`, or remove `power` to set `min` and `max` yourself"),
            );
        }
    }
    let looks = match t.get("looks") {
        Some(l) => l.integer_in(p, 1, i64::from(MAX_LOOKS)).map(|v| v as u32),
        None => Some(DEFAULT_LOOKS),
    };
    let cv = t.get("cv").map(|c| c.fraction_in(p, 0.0, 1.0, true));
    match (power, looks, cv, decided) {
        (Some(power), Some(looks), None | Some(Some(_)), true) => {
            let power = PowerDesign { power, looks, cv: cv.flatten(), noise_campaigns: 0 };
            (1, Some(AdaptiveRepeats { min: 0, max: 0, target_ci: 0.0, stop: StopRule::Decided, power: Some(power) }))
        }
        _ => (1, None),
    }
}

/// `devices = [...]`: every selector must parse and pick at least one device of the lab.
fn read_selectors(f: &Field, p: &mut Problems, lab: &Lab) -> Vec<Selector> {
    let Some(list) = f.strings(p) else {
        return Vec::new();
    };
    if f.item.as_array().is_some_and(|a| a.is_empty()) {
        f.problem(
            p,
            "no devices selected",
            "name devices, e.g. `devices = [\"tag:phone\"]` or `devices = [\"sim-*\"]`",
        );
    }
    let mut out = Vec::new();
    for (i, (text, span)) in list.into_iter().enumerate() {
        let key = format!("{}[{i}]", f.path);
        match Selector::parse(&text) {
            Err(e) => p.push(
                span,
                &key,
                format!("invalid device selector: {e}"),
                "write a device name or glob (`sim-*`), `tag:NAME` or `model:NAME`",
            ),
            Ok(sel) if !lab.devices.iter().any(|d| sel.matches(d)) => {
                p.push(span, &key, format!("`{sel}` matches no device in lab {}", lab.source.display()), available(lab))
            }
            Ok(sel) => out.push(sel),
        }
    }
    out
}

/// What could be selected instead: the lab's device names, tags and models.
fn available(lab: &Lab) -> String {
    if lab.devices.is_empty() {
        return format!("add devices to {} first", lab.source.display());
    }
    let names: Vec<&str> = lab.devices.iter().map(|d| d.name.as_str()).collect();
    let tags: BTreeSet<&str> = lab.devices.iter().flat_map(|d| d.tags.iter().map(String::as_str)).collect();
    let models: BTreeSet<&str> = lab.devices.iter().map(|d| d.model.as_str()).collect();
    let mut fix = format!("use one of the lab's devices ({})", names.join(", "));
    if !tags.is_empty() {
        let tags: Vec<String> = tags.into_iter().map(|t| format!("tag:{t}")).collect();
        fix += &format!(", tags ({})", tags.join(", "));
    }
    let models: Vec<String> = models.into_iter().map(|m| format!("model:{m}")).collect();
    fix += &format!(" or models ({})", models.join(", "));
    fix
}
