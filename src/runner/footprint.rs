//! The lab's own footprint during soaks: it must not be what wakes up.
//!
//! Read from the kernel at the start and end of every soak (no polling):
//! getrusage(RUSAGE_SELF) for the whole lab process (all threads, exited ones
//! included), minus the traffic endpoint's thread, whose work is the app's traffic
//! and is reported on its own (from /proc/self/task/<tid>/schedstat and status).
//! With several devices soaking at once the windows overlap and each counts the
//! whole process, so the figure is an upper bound.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use serde::Serialize;
use serde_json::json;

use crate::collect::linux::procfs::{parse_pid_status, parse_schedstat_ns};

/// The targets from the issue: under 1 wakeup per second and 0.5 % of one core.
pub const TARGET_WAKEUPS_PER_S: f64 = 1.0;
pub const TARGET_CPU_PCT: f64 = 0.5;

/// CPU time and context switches, as counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    pub cpu_s: f64,
    pub voluntary: u64,
    pub involuntary: u64,
}

impl Usage {
    fn minus(&self, o: &Usage) -> Usage {
        Usage {
            cpu_s: (self.cpu_s - o.cpu_s).max(0.0),
            voluntary: self.voluntary.saturating_sub(o.voluntary),
            involuntary: self.involuntary.saturating_sub(o.involuntary),
        }
    }

    fn plus(&self, o: &Usage) -> Usage {
        Usage {
            cpu_s: self.cpu_s + o.cpu_s,
            voluntary: self.voluntary + o.voluntary,
            involuntary: self.involuntary + o.involuntary,
        }
    }
}

/// One soak's starting point.
#[derive(Debug)]
pub struct Window {
    wall: Instant,
    process: Usage,
    endpoint: Option<Usage>,
}

#[derive(Debug, Default)]
struct Totals {
    soaks: u32,
    soak_s: f64,
    lab: Usage,
    endpoint: Usage,
}

/// Accumulates the lab's usage over every soak of a campaign.
#[derive(Debug)]
pub struct Footprint {
    /// The endpoint's thread, whose work is not the lab's own.
    endpoint_tid: Option<i32>,
    totals: Mutex<Totals>,
}

impl Footprint {
    pub fn new(endpoint_tid: Option<i32>) -> Self {
        Footprint { endpoint_tid, totals: Mutex::new(Totals::default()) }
    }

    pub fn begin(&self) -> Window {
        Window { wall: Instant::now(), process: process_usage(), endpoint: self.endpoint_tid.and_then(thread_usage) }
    }

    pub fn end(&self, w: Window) {
        let process = process_usage().minus(&w.process);
        let endpoint = match (w.endpoint, self.endpoint_tid.and_then(thread_usage)) {
            (Some(a), Some(b)) => b.minus(&a),
            _ => Usage::default(),
        };
        let mut t = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
        t.soaks += 1;
        t.soak_s += w.wall.elapsed().as_secs_f64();
        t.lab = t.lab.plus(&process.minus(&endpoint));
        t.endpoint = t.endpoint.plus(&endpoint);
    }

    /// The campaign's footprint for its record; `None` when no soak was measured.
    pub fn to_json(&self) -> Option<serde_json::Value> {
        let t = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
        if t.soaks == 0 || t.soak_s <= 0.0 {
            return None;
        }
        let rates = |u: &Usage| {
            json!({
                "cpu_s": round(u.cpu_s, 6),
                "cpu_pct_of_core": round(100.0 * u.cpu_s / t.soak_s, 4),
                "wakeups": u.voluntary,
                "wakeups_per_s": round(u.voluntary as f64 / t.soak_s, 3),
                "involuntary_switches": u.involuntary,
            })
        };
        let lab_cpu_pct = 100.0 * t.lab.cpu_s / t.soak_s;
        let lab_wakeups = t.lab.voluntary as f64 / t.soak_s;
        let mut v = json!({
            "measured": "over every soak: getrusage(RUSAGE_SELF) of the lab process, minus the endpoint's thread",
            "soaks": t.soaks,
            "soak_s": round(t.soak_s, 3),
            "lab": rates(&t.lab),
            "target": { "wakeups_per_s": TARGET_WAKEUPS_PER_S, "cpu_pct_of_core": TARGET_CPU_PCT },
            "within_target": lab_wakeups < TARGET_WAKEUPS_PER_S && lab_cpu_pct < TARGET_CPU_PCT,
        });
        if self.endpoint_tid.is_some() {
            v["endpoint"] = rates(&t.endpoint);
        }
        Some(v)
    }
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// The whole lab process: every thread, live and exited.
fn process_usage() -> Usage {
    use nix::sys::resource::{UsageWho, getrusage};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            Usage {
                cpu_s: secs(u.user_time()) + secs(u.system_time()),
                voluntary: u.voluntary_context_switches().max(0) as u64,
                involuntary: u.involuntary_context_switches().max(0) as u64,
            }
        }
        Err(_) => Usage::default(),
    }
}

/// One thread of this process, read without waking it.
fn thread_usage(tid: i32) -> Option<Usage> {
    let dir = format!("/proc/self/task/{tid}");
    let status = parse_pid_status(&std::fs::read_to_string(format!("{dir}/status")).ok()?).ok()?;
    let ns = parse_schedstat_ns(&std::fs::read_to_string(format!("{dir}/schedstat")).ok()?)?;
    Some(Usage {
        cpu_s: ns as f64 / 1e9,
        voluntary: status.voluntary_ctxt_switches,
        involuntary: status.nonvoluntary_ctxt_switches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins until this thread has used `secs` of CPU (its own clock: load-proof).
    fn spin_cpu(secs: f64) {
        let cpu = || {
            let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap();
            ts.tv_sec() as f64 + ts.tv_nsec() as f64 / 1e9
        };
        let start = cpu();
        let mut x = 0u64;
        while cpu() - start < secs {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
    }

    #[test]
    fn soaks_are_accumulated_and_a_busy_lab_is_over_target() {
        let f = Footprint::new(None);
        assert_eq!(f.to_json(), None, "no soak, no figure");
        let w = f.begin();
        std::thread::sleep(std::time::Duration::from_millis(300));
        f.end(w);
        let v = f.to_json().unwrap();
        assert_eq!(v["soaks"], 1);
        assert!(v["soak_s"].as_f64().unwrap() >= 0.3);
        assert!(v.get("endpoint").is_none(), "no endpoint, no endpoint figure");
        // (An upper bound on a sleeping process is checked on the real binary, in
        // tests/integration/host_trials.rs: here other tests' threads share the process.)

        let busy = Footprint::new(None);
        let w = busy.begin();
        spin_cpu(0.15);
        busy.end(w);
        let v = busy.to_json().unwrap();
        assert!(v["lab"]["cpu_s"].as_f64().unwrap() >= 0.15, "{v}");
        assert_eq!(v["within_target"], false);
    }

    #[test]
    fn the_endpoint_thread_is_told_apart() {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (spun_tx, spun_rx) = std::sync::mpsc::channel::<()>();
        let (quit_tx, quit_rx) = std::sync::mpsc::channel::<()>();
        // Stands in for the endpoint's thread: spins 150 ms of CPU, then stays alive (and asleep)
        // until the window is closed, as the endpoint does.
        let spinner = std::thread::spawn(move || {
            tid_tx.send(nix::unistd::gettid().as_raw()).unwrap();
            go_rx.recv().unwrap();
            spin_cpu(0.15);
            spun_tx.send(()).unwrap();
            quit_rx.recv().unwrap();
        });
        let f = Footprint::new(Some(tid_rx.recv().unwrap()));
        let w = f.begin();
        go_tx.send(()).unwrap();
        spun_rx.recv().unwrap();
        f.end(w);
        quit_tx.send(()).unwrap();
        spinner.join().unwrap();
        let v = f.to_json().unwrap();
        let endpoint_cpu = v["endpoint"]["cpu_s"].as_f64().unwrap();
        assert!(endpoint_cpu >= 0.15, "the spinning thread's time is the endpoint's: {v}");
    }

    #[test]
    fn thread_usage_reads_a_live_thread() {
        let me = nix::unistd::gettid().as_raw();
        spin_cpu(0.03);
        let u = thread_usage(me).expect("this thread's /proc entry");
        assert!(u.cpu_s >= 0.02, "{u:?}");
    }
}
