//! The order metrics are shown in, the same in every table and file.

use std::collections::BTreeSet;

use super::metrics::KNOWN_METRICS;

/// Display order: the plan's metric list as written; then any other observed metric,
/// known ones in [`KNOWN_METRICS`] order and the rest alphabetically. Without a plan
/// list that is just the fixed order. No metric appears twice.
pub fn metric_order<'a>(plan_metrics: &[String], observed: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in plan_metrics {
        if !out.contains(m) {
            out.push(m.clone());
        }
    }
    let extra: BTreeSet<&str> = observed.into_iter().filter(|m| !plan_metrics.iter().any(|p| p == m)).collect();
    for &known in KNOWN_METRICS {
        if extra.contains(known) {
            out.push(known.to_string());
        }
    }
    out.extend(extra.into_iter().filter(|m| !KNOWN_METRICS.contains(m)).map(str::to_string));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_order_first_then_known_then_alphabetical() {
        let plan = vec!["cpu_pct".to_string(), "battery_drop_pct".to_string()];
        let observed = ["wakeups", "requests", "battery_drop_pct", "alpha", "cpu_pct", "memory_mb", "wakeups"];
        assert_eq!(
            metric_order(&plan, observed),
            ["cpu_pct", "battery_drop_pct", "memory_mb", "requests", "alpha", "wakeups"]
        );
    }

    #[test]
    fn without_plan_list_uses_fixed_order() {
        let observed = ["zeta", "requests", "cpu_pct", "charge_used_mah", "battery_drop_pct", "beta"];
        assert_eq!(
            metric_order(&[], observed),
            ["battery_drop_pct", "charge_used_mah", "cpu_pct", "requests", "beta", "zeta"]
        );
    }
}
