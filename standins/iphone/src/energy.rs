//! The energy gauge (DVT channel `com.apple.xcode.debug-gauge-data-providers.Energy`):
//! `startSamplingForPIDs:` and `stopSamplingForPIDs:` (no reply), `sampleAttributes:forPIDs:`
//! → an NSDictionary of NSNumber pid → {attribute: number}, as Xcode's gauge gets it. A
//! running pid's `energy.cost` is its app's profile (± 5 % jitter by sample) split into
//! cpu, networking (only an app with a network workload), display and gpu parts that sum
//! to it; location and app-state costs are 0. A pid that does not run is left out.

use std::collections::HashMap;
use std::time::Instant;

use crate::archive::Obj;
use crate::processes::Process;
use crate::profile::jitter;

pub const SERVICE: &str = "com.apple.xcode.debug-gauge-data-providers.Energy";

/// Shares of the cost besides the cpu's (which takes what is left).
const NETWORKING: f64 = 0.25;
const DISPLAY: f64 = 0.15;
const GPU: f64 = 0.05;

/// One energy channel: when each pid's sampling started and how many samples it had.
#[derive(Default)]
pub struct Energy {
    started: HashMap<u64, Instant>,
    samples: HashMap<u64, u64>,
}

/// `(attribute, value)` of one pid's sample, `energy.cost` first.
pub fn attributes(p: &Process, sample: u64, seconds: u64) -> Vec<(&'static str, f64)> {
    let total = p.profile.energy_cost * jitter(p.pid, sample, "energy");
    let networking = if crate::workload::Plan::of(p).is_some() { total * NETWORKING } else { 0.0 };
    let (display, gpu) = (total * DISPLAY, total * GPU);
    vec![
        ("energy.cost", total),
        ("energy.cpu.cost", total - networking - display - gpu),
        ("energy.gpu.cost", gpu),
        ("energy.networking.cost", networking),
        ("energy.display.cost", display),
        ("energy.location.cost", 0.0),
        ("energy.appstate.cost", 0.0),
        ("kIDEGaugeSecondsSinceInitialQueryKey", seconds as f64),
    ]
}

impl Energy {
    pub fn start(&mut self, pids: &[u64]) {
        for pid in pids {
            self.started.entry(*pid).or_insert_with(Instant::now);
        }
    }

    pub fn stop(&mut self, pids: &[u64]) {
        for pid in pids {
            self.started.remove(pid);
        }
    }

    /// The reply to `sampleAttributes:forPIDs:` and the pids in it.
    pub fn sample(&mut self, pids: &[u64], running: &[Process]) -> (Obj, Vec<u64>) {
        let mut entries = Vec::new();
        let mut present = Vec::new();
        for pid in pids {
            let Some(p) = running.iter().find(|p| p.pid == *pid) else { continue };
            // The gauge counts from the first query of a pid it was not asked to start.
            let since = *self.started.entry(*pid).or_insert_with(Instant::now);
            let n = self.samples.entry(*pid).or_default();
            let attrs = attributes(p, *n, since.elapsed().as_secs());
            *n += 1;
            let inner = attrs
                .into_iter()
                .map(|(k, v)| {
                    let value = if k.starts_with("kIDE") { Obj::int(v as u64) } else { Obj::real(v) };
                    (Obj::str(k), value)
                })
                .collect();
            entries.push((Obj::int(*pid), Obj::Dict(inner)));
            present.push(*pid);
        }
        (Obj::Dict(entries), present)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    fn app(pid: u64, env: serde_json::Value) -> Process {
        Process {
            pid,
            bundle_id: "com.x".into(),
            env: env.as_object().unwrap().clone(),
            args: vec![],
            suspended: false,
            executable: "X".into(),
            profile: Profile { energy_cost: 12.0, ..Profile::default() },
        }
    }

    #[test]
    fn the_parts_sum_to_the_profiles_cost_and_the_crate_reads_them() {
        let running =
            [app(1001, serde_json::json!({})), app(1002, serde_json::json!({"LAB_ENDPOINT_URL": "http://h/"}))];
        let mut e = Energy::default();
        e.start(&[1001]);
        let (reply, present) = e.sample(&[1001, 1002, 4242], &running);
        assert_eq!(present, [1001, 1002], "a pid that does not run is left out");
        let samples =
            idevice::dvt::energy_monitor::EnergySample::from_bytes(&crate::archive::encode_obj(&reply)).unwrap();
        assert_eq!(samples.len(), 2);
        for s in &samples {
            assert!((s.total_energy - 12.0).abs() <= 0.6, "{s:?}");
            let parts = [s.cpu_energy, s.gpu_energy, s.networking_energy, s.display_energy, s.location_energy];
            assert!((parts.iter().sum::<f64>() + s.appstate_energy - s.total_energy).abs() < 1e-9, "{s:?}");
        }
        let by_pid = |pid| samples.iter().find(|s| s.pid == pid).unwrap();
        assert_eq!(by_pid(1001).networking_energy, 0.0, "no workload, no networking");
        assert!(by_pid(1002).networking_energy > 0.0);
    }
}
