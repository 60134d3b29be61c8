//! Metric names a runbook can ask for in `[metrics] collect`, in the order reports show
//! them (battery first, then power, CPU, memory, traffic).

/// Every metric `lab` knows how to record. Devices report the subset they can measure.
pub const KNOWN_METRICS: &[&str] = &[
    "battery_drop_pct",
    "charge_used_mah",
    "avg_power_mw",
    "energy_level",
    "cpu_pct",
    "memory_mb",
    "requests",
    // Hosts (kernel accounting of the app's process tree over the soak; RAPL when readable).
    "cpu_user_s",
    "cpu_system_s",
    "wakeups_per_s",
    "ctx_switches_voluntary",
    "ctx_switches_involuntary",
    "read_bytes",
    "write_bytes",
    "energy_j",
    // The traffic endpoint's count for the trial over the soak.
    "endpoint_requests",
    "endpoint_bytes",
    // Android and iOS output (collect/): per-app costs over a trial. Estimates keep
    // their own names so they never share a series with measurements.
    "app_estimated_mah",
    "estimated_charge_mah",
    "cpu_time_ms",
    "cpu_user_ms",
    "cpu_system_ms",
    "net_rx_bytes",
    "net_tx_bytes",
    "net_rx_packets",
    "net_tx_packets",
    "wakelock_ms",
    "screen_on_ms",
    "memory_rss_mb",
    "battery_temp_c",
];
