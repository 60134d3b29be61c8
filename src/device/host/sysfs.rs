//! The host's own state (load, power source, CPU governor, temperature) and its RAPL
//! energy counters, read from /proc and /sys through the host's transport.

use std::path::{Path, PathBuf};

use crate::collect::linux::procfs::parse_loadavg;
use crate::device::{Provenance, Reading, StateSnapshot};
use crate::transport::{Transport, TransportError};

/// Where the kernel's files are (tests point these at a fake tree).
#[derive(Debug, Clone, PartialEq)]
pub struct HostPaths {
    pub proc: PathBuf,
    pub sys: PathBuf,
}

impl Default for HostPaths {
    fn default() -> Self {
        HostPaths { proc: PathBuf::from("/proc"), sys: PathBuf::from("/sys") }
    }
}

async fn text(t: &dyn Transport, path: &Path) -> Option<String> {
    t.read_file(path).await.ok().map(|b| String::from_utf8_lossy(&b).trim().to_string())
}

async fn number(t: &dyn Transport, path: &Path) -> Option<f64> {
    text(t, path).await?.parse().ok()
}

/// Load, power source, governor and temperature. What cannot be read stays `Unknown`;
/// a host that cannot be reached at all is an error (the runner waits for it).
pub async fn host_state(t: &dyn Transport, paths: &HostPaths) -> Result<StateSnapshot, TransportError> {
    let mut s = StateSnapshot::default();
    let load = match t.read_file(&paths.proc.join("loadavg")).await {
        Ok(b) => parse_loadavg(String::from_utf8_lossy(&b).trim()).ok(),
        Err(e @ TransportError::Unreachable { .. }) => return Err(e),
        Err(_) => None,
    };
    if let Some(load) = load {
        s.load_avg = Reading::read(load);
    }

    // Power supplies (Documentation/ABI/testing/sysfs-class-power): `type` is Mains,
    // USB or Battery; adapters have `online`, batteries `capacity` and `status`.
    let ps = paths.sys.join("class/power_supply");
    let (mut adapters, mut online) = (0, false);
    let mut battery: Option<(Option<f64>, Option<String>)> = None;
    for name in t.list_dir(&ps).await.unwrap_or_default() {
        let dir = ps.join(&name);
        match text(t, &dir.join("type")).await.as_deref() {
            Some("Mains") | Some("USB") => {
                adapters += 1;
                online |= number(t, &dir.join("online")).await == Some(1.0);
            }
            Some("Battery") if battery.is_none() => {
                battery = Some((number(t, &dir.join("capacity")).await, text(t, &dir.join("status")).await));
            }
            _ => {}
        }
    }
    if let Some((capacity, status)) = &battery {
        if let Some(c) = capacity {
            s.battery_pct = Reading::read(*c);
        }
        if let Some(st) = status {
            s.charging = Reading::read(st == "Charging");
        }
    }
    if adapters > 0 {
        s.external_power = Reading::read(online);
    } else if let Some((_, Some(st))) = &battery {
        // No adapter listed: a battery that is not discharging is on external power.
        s.external_power = Reading::read(st != "Discharging");
    }

    if let Some(g) = text(t, &paths.sys.join("devices/system/cpu/cpu0/cpufreq/scaling_governor")).await {
        s.cpu_governor = Reading::Known { value: g, from: Provenance::Read };
    }

    let thermal = paths.sys.join("class/thermal");
    let mut hottest: Option<f64> = None;
    for name in t.list_dir(&thermal).await.unwrap_or_default() {
        if !name.starts_with("thermal_zone") {
            continue;
        }
        // millidegrees Celsius
        if let Some(mc) = number(t, &thermal.join(&name).join("temp")).await {
            hottest = Some(hottest.map_or(mc / 1000.0, |h| h.max(mc / 1000.0)));
        }
    }
    if let Some(h) = hottest {
        s.cpu_temp_c = Reading::read(h);
    }
    Ok(s)
}

/// One reading of the RAPL package counters.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergySample {
    /// (zone folder, energy µJ, counter range µJ) per CPU package.
    pub zones: Vec<(String, u64, u64)>,
}

/// The package-level RAPL counters (`intel-rapl:N` named `package-N`; sub-zones and
/// `psys` are left out so that nothing is counted twice). `None` when there are none
/// or one is unreadable (the counters are root-only on kernels patched for
/// CVE-2020-8694): then the trial has no energy figure, never an invented one.
pub async fn rapl(t: &dyn Transport, paths: &HostPaths) -> Option<EnergySample> {
    let root = paths.sys.join("class/powercap");
    let mut zones = Vec::new();
    for name in t.list_dir(&root).await.ok()? {
        let top_level = name.strip_prefix("intel-rapl:").is_some_and(|rest| !rest.contains(':'));
        if !top_level {
            continue;
        }
        let dir = root.join(&name);
        if !text(t, &dir.join("name")).await.is_some_and(|n| n.starts_with("package")) {
            continue;
        }
        let energy = text(t, &dir.join("energy_uj")).await?.parse().ok()?;
        let range = text(t, &dir.join("max_energy_range_uj")).await.and_then(|r| r.parse().ok()).unwrap_or(0);
        zones.push((name, energy, range));
    }
    (!zones.is_empty()).then_some(EnergySample { zones })
}

/// Joules used between two readings, summed over packages. A counter that wrapped
/// around (it does, every few minutes to hours) is unwrapped with its range.
pub fn energy_joules(start: &EnergySample, end: &EnergySample) -> Option<f64> {
    let mut total_uj = 0u64;
    for (name, e1, range) in &end.zones {
        let (_, e0, _) = start.zones.iter().find(|z| &z.0 == name)?;
        total_uj += if e1 >= e0 { e1 - e0 } else { (range - e0) + e1 };
    }
    Some(total_uj as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::LocalTransport;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[tokio::test]
    async fn a_laptop_on_ac_with_rapl() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write(r, "proc/loadavg", "0.25 0.30 0.40 1/200 1234\n");
        write(r, "sys/class/power_supply/AC/type", "Mains\n");
        write(r, "sys/class/power_supply/AC/online", "1\n");
        write(r, "sys/class/power_supply/BAT0/type", "Battery\n");
        write(r, "sys/class/power_supply/BAT0/capacity", "87\n");
        write(r, "sys/class/power_supply/BAT0/status", "Charging\n");
        write(r, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "powersave\n");
        write(r, "sys/class/thermal/thermal_zone0/temp", "41000\n");
        write(r, "sys/class/thermal/thermal_zone1/temp", "55500\n");
        write(r, "sys/class/powercap/intel-rapl:0/name", "package-0\n");
        write(r, "sys/class/powercap/intel-rapl:0/energy_uj", "1000000\n");
        write(r, "sys/class/powercap/intel-rapl:0/max_energy_range_uj", "262143328850\n");
        write(r, "sys/class/powercap/intel-rapl:0:0/name", "core\n");
        write(r, "sys/class/powercap/intel-rapl:0:0/energy_uj", "5\n");
        write(r, "sys/class/powercap/intel-rapl:1/name", "psys\n");
        write(r, "sys/class/powercap/intel-rapl:1/energy_uj", "9\n");
        let paths = HostPaths { proc: r.join("proc"), sys: r.join("sys") };
        let t = LocalTransport::new("local");
        let s = host_state(&t, &paths).await.unwrap();
        assert_eq!(s.load_avg.value(), Some(0.25));
        assert_eq!(s.external_power.value(), Some(true));
        assert_eq!(s.battery_pct.value(), Some(87.0));
        assert_eq!(s.charging.value(), Some(true));
        assert_eq!(s.cpu_governor.text(), Some("powersave"));
        assert_eq!(s.cpu_temp_c.value(), Some(55.5));

        let start = rapl(&t, &paths).await.unwrap();
        assert_eq!(start.zones, [("intel-rapl:0".to_string(), 1_000_000, 262_143_328_850)]);
        write(r, "sys/class/powercap/intel-rapl:0/energy_uj", "13500000\n");
        let end = rapl(&t, &paths).await.unwrap();
        assert_eq!(energy_joules(&start, &end), Some(12.5));
        // Wrapped: 1 J before the end of the range, 2 J after zero.
        let near_top = EnergySample { zones: vec![("intel-rapl:0".into(), 9_000_000, 10_000_000)] };
        let wrapped = EnergySample { zones: vec![("intel-rapl:0".into(), 2_000_000, 10_000_000)] };
        assert_eq!(energy_joules(&near_top, &wrapped), Some(3.0));
    }

    #[tokio::test]
    async fn a_vm_without_sysfs_knows_only_its_load() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write(r, "proc/loadavg", "1.50 1.0 1.0 1/1 1\n");
        let paths = HostPaths { proc: r.join("proc"), sys: r.join("sys") };
        let t = LocalTransport::new("local");
        let s = host_state(&t, &paths).await.unwrap();
        assert_eq!(s.load_avg.value(), Some(1.5));
        assert!(s.external_power.is_unknown() && s.battery_pct.is_unknown() && s.cpu_governor.is_unknown());
        assert_eq!(rapl(&t, &paths).await, None, "no RAPL: no energy figure");
        // An unreadable counter is no figure either.
        write(r, "sys/class/powercap/intel-rapl:0/name", "package-0\n");
        assert_eq!(rapl(&t, &paths).await, None);
    }
}
