//! Metric names a runbook can ask for in `[metrics] collect`, in the order reports show
//! them (battery first, then power, CPU, memory, traffic), and the per-rail energy metrics
//! accepted by their prefix.

/// Every metric `lab` knows how to record. Devices report the subset they can measure.
pub const KNOWN_METRICS: &[&str] = &[
    "battery_drop_pct",
    "charge_used_mah",
    "avg_power_mw",
    // A power monitor supplying the device (docs/platforms/monitors.md): names of their
    // own, so they never share a series with what the phone says about itself.
    "monitor_energy_j",
    "monitor_net_energy_j",
    "monitor_avg_power_mw",
    "monitor_idle_power_mw",
    "monitor_avg_current_ma",
    "monitor_peak_current_ma",
    "energy_per_request_mj",
    "net_energy_per_request_mj",
    "monitor_samples",
    "monitor_sample_rate_hz",
    "monitor_dropped_samples",
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
    // Both directions together (an iPhone's pcapd count of the app's packets).
    "net_packets",
    "net_bytes",
    "wakelock_ms",
    "screen_on_ms",
    "memory_rss_mb",
    "battery_temp_c",
];

/// The prefix of a power rail's energy over a trial, `rail_energy_mj.<rail>` (mJ, from a
/// Perfetto trace): rail names differ per phone, so they are accepted by this prefix
/// instead of being listed.
pub const RAIL_ENERGY_PREFIX: &str = "rail_energy_mj.";

/// The rail a `rail_energy_mj.<rail>` metric names; `None` for any other metric and for
/// the prefix with no rail name after it.
pub fn rail_of(metric: &str) -> Option<&str> {
    metric.strip_prefix(RAIL_ENERGY_PREFIX).filter(|rail| !rail.trim().is_empty())
}

/// Whether a runbook may name `metric`: one of [`KNOWN_METRICS`] or a rail's energy.
pub fn is_known_metric(metric: &str) -> bool {
    KNOWN_METRICS.contains(&metric) || rail_of(metric).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rail_energy_metric_is_known_by_its_prefix_and_needs_a_rail_name() {
        assert!(is_known_metric("charge_used_mah"));
        assert_eq!(rail_of("rail_energy_mj.S4M_VDD_CPUCL0"), Some("S4M_VDD_CPUCL0"));
        assert!(is_known_metric("rail_energy_mj.S4M_VDD_CPUCL0"));
        // The names Perfetto gives rails are kept whole, whatever they contain.
        assert!(is_known_metric("rail_energy_mj.[VSYS_PWR_DISPLAY]:Display"));
        for no_rail in ["rail_energy_mj.", "rail_energy_mj. ", "rail_energy_mj", "rail_energy_mj_CPU", "CPU_RAIL"] {
            assert!(!is_known_metric(no_rail), "{no_rail}");
        }
    }
}
