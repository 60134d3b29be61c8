//! Metric names a runbook can ask for in `[metrics] collect`.

/// Every metric `lab` knows how to record. Devices report the subset they can measure.
pub const KNOWN_METRICS: &[&str] =
    &["battery_drop_pct", "charge_used_mah", "avg_power_mw", "energy_level", "cpu_pct", "memory_mb", "requests"];
