//! What an app's process tree cost over the soak: the difference of two readings.

use super::tree::{ProcKey, TreeSample};
use crate::measure::Measurement;

/// Where the CPU time came from (the report shows it with every number).
pub const SOURCE_CGROUP_CPU: &str = "cgroup v2 cpu.stat (µs)";
pub const SOURCE_PROC_CPU: &str = "/proc/<pid>/stat utime+stime+cutime+cstime (clock ticks)";
pub const SOURCE_CTXT: &str = "/proc/<pid>/task/<tid>/status ctxt switches";
pub const SOURCE_HWM: &str = "/proc/<pid>/status VmHWM";
pub const SOURCE_IO: &str = "/proc/<pid>/io";
pub const SOURCE_RAPL: &str = "RAPL /sys/class/powercap energy_uj (whole CPU package)";

#[derive(Debug, Clone, PartialEq)]
pub struct TreeUsage {
    /// Seconds between the two readings.
    pub window_s: f64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub cpu_source: &'static str,
    pub voluntary: u64,
    pub involuntary: u64,
    /// Sum of the peak RSS of the processes alive at the end, kB: an upper bound of the
    /// tree's peak (the processes' peaks need not coincide).
    pub peak_rss_kb: Option<u64>,
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    /// Processes in the tree at the end.
    pub processes: usize,
}

/// The cost of the tree between `start` and `end`, with `ticks_per_s` clock ticks per
/// second (USER_HZ, 100 on Linux).
///
/// CPU time: from the cgroup when both readings have it (it also counts processes
/// that exited during the soak); else per process, utime+stime plus the children's
/// cutime+cstime (children reaped by the tree are counted through their parent).
/// Context switches and I/O: per process (and thread), end minus start; a process
/// born during the soak counts whole; one that exited during it is lost.
pub fn tree_usage(start: &TreeSample, end: &TreeSample, ticks_per_s: f64) -> TreeUsage {
    let window_s = end.at.saturating_sub(start.at).as_secs_f64();
    let (cpu_user_s, cpu_system_s, cpu_source) = match (start.cgroup_cpu, end.cgroup_cpu) {
        (Some(a), Some(b)) => (
            b.user_usec.saturating_sub(a.user_usec) as f64 / 1e6,
            b.system_usec.saturating_sub(a.system_usec) as f64 / 1e6,
            SOURCE_CGROUP_CPU,
        ),
        _ => {
            let (mut user, mut system) = (0u64, 0u64);
            for (key, p) in &end.procs {
                let before = start.procs.get(key).map(|s| s.stat).unwrap_or_default();
                user += (p.stat.utime + p.stat.cutime).saturating_sub(before.utime + before.cutime);
                system += (p.stat.stime + p.stat.cstime).saturating_sub(before.stime + before.cstime);
            }
            (user as f64 / ticks_per_s, system as f64 / ticks_per_s, SOURCE_PROC_CPU)
        }
    };
    let (mut voluntary, mut involuntary) = (0u64, 0u64);
    for (key, p) in &end.procs {
        for (tid, t) in &p.threads {
            let before = thread_before(start, key, *tid);
            voluntary += t.voluntary_ctxt_switches.saturating_sub(before.0);
            involuntary += t.nonvoluntary_ctxt_switches.saturating_sub(before.1);
        }
    }
    let hwm: Vec<u64> = end.procs.values().filter_map(|p| p.vm_hwm_kb).collect();
    let io: Vec<(u64, u64)> = end
        .procs
        .iter()
        .filter_map(|(key, p)| {
            let io = p.io?;
            let before = start.procs.get(key).and_then(|s| s.io).unwrap_or_default();
            Some((io.read_bytes.saturating_sub(before.read_bytes), io.write_bytes.saturating_sub(before.write_bytes)))
        })
        .collect();
    TreeUsage {
        window_s,
        cpu_user_s,
        cpu_system_s,
        cpu_source,
        voluntary,
        involuntary,
        peak_rss_kb: (!hwm.is_empty()).then(|| hwm.iter().sum()),
        read_bytes: (!io.is_empty()).then(|| io.iter().map(|x| x.0).sum()),
        write_bytes: (!io.is_empty()).then(|| io.iter().map(|x| x.1).sum()),
        processes: end.procs.len(),
    }
}

fn thread_before(start: &TreeSample, key: &ProcKey, tid: u32) -> (u64, u64) {
    start
        .procs
        .get(key)
        .and_then(|p| p.threads.get(&tid))
        .map_or((0, 0), |t| (t.voluntary_ctxt_switches, t.nonvoluntary_ctxt_switches))
}

impl TreeUsage {
    /// The measurements a host trial records. Rates need a window; without one
    /// (a soak of no length) only the totals are given.
    pub fn measurements(&self) -> Vec<Measurement> {
        let cpu = self.cpu_user_s + self.cpu_system_s;
        let mut m = Vec::new();
        if self.window_s > 0.0 {
            m.push(Measurement::new("cpu_pct", 100.0 * cpu / self.window_s, "%", self.cpu_source));
        }
        m.push(Measurement::new("cpu_user_s", self.cpu_user_s, "s", self.cpu_source));
        m.push(Measurement::new("cpu_system_s", self.cpu_system_s, "s", self.cpu_source));
        if self.window_s > 0.0 {
            m.push(Measurement::new("wakeups_per_s", self.voluntary as f64 / self.window_s, "1/s", SOURCE_CTXT));
        }
        m.push(Measurement::new("ctx_switches_voluntary", self.voluntary as f64, "count", SOURCE_CTXT));
        m.push(Measurement::new("ctx_switches_involuntary", self.involuntary as f64, "count", SOURCE_CTXT));
        if let Some(kb) = self.peak_rss_kb {
            m.push(Measurement::new("memory_mb", kb as f64 / 1024.0, "MB", SOURCE_HWM));
        }
        if let Some(b) = self.read_bytes {
            m.push(Measurement::new("read_bytes", b as f64, "bytes", SOURCE_IO));
        }
        if let Some(b) = self.write_bytes {
            m.push(Measurement::new("write_bytes", b as f64, "bytes", SOURCE_IO));
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::collect::linux::procfs::{CgroupCpu, PidIo, PidStat, PidStatus};
    use crate::device::host::tree::ProcSample;

    fn proc(utime: u64, stime: u64, cutime: u64, threads: &[(u32, u64, u64)], io: Option<(u64, u64)>) -> ProcSample {
        ProcSample {
            stat: PidStat { utime, stime, cutime, ..PidStat::default() },
            vm_hwm_kb: Some(2048),
            io: io.map(|(r, w)| PidIo { read_bytes: r, write_bytes: w }),
            threads: threads
                .iter()
                .map(|&(tid, v, n)| {
                    (tid, PidStatus { voluntary_ctxt_switches: v, nonvoluntary_ctxt_switches: n, vm_hwm_kb: None })
                })
                .collect(),
        }
    }

    fn sample(at_s: u64, procs: Vec<((u32, u64), ProcSample)>, cg: Option<(u64, u64)>) -> TreeSample {
        TreeSample {
            at: Duration::from_secs(at_s),
            cgroup_cpu: cg.map(|(u, s)| CgroupCpu { usage_usec: u + s, user_usec: u, system_usec: s }),
            procs: procs.into_iter().collect::<BTreeMap<_, _>>(),
            raw: Vec::new(),
        }
    }

    #[test]
    fn per_process_deltas_count_newborns_whole_and_reaped_children_through_cutime() {
        let start =
            sample(100, vec![((10, 1), proc(100, 50, 0, &[(10, 1000, 5), (11, 30, 0)], Some((0, 4096))))], None);
        let end = sample(
            120,
            vec![
                // The leader: 3 s user (2 s itself + 1 s of a reaped child), 1 s system.
                ((10, 1), proc(300, 150, 100, &[(10, 1400, 6), (11, 30, 0)], Some((0, 8192)))),
                // Born during the soak: counts whole.
                ((12, 900), proc(50, 0, 0, &[(12, 200, 1)], None)),
                // pid 10 reused by another process would have another start time: not mixed up.
            ],
            None,
        );
        let u = tree_usage(&start, &end, 100.0);
        assert_eq!(u.window_s, 20.0);
        assert_eq!((u.cpu_user_s, u.cpu_system_s), (3.5, 1.0));
        assert_eq!(u.cpu_source, SOURCE_PROC_CPU);
        assert_eq!((u.voluntary, u.involuntary), (600, 2));
        assert_eq!(u.peak_rss_kb, Some(4096));
        assert_eq!((u.read_bytes, u.write_bytes), (Some(0), Some(4096)));
        let m = u.measurements();
        let get = |name: &str| m.iter().find(|x| x.metric == name).unwrap().value;
        assert_eq!(get("cpu_pct"), 100.0 * 4.5 / 20.0);
        assert_eq!(get("wakeups_per_s"), 30.0);
        assert_eq!(get("memory_mb"), 4.0);
    }

    #[test]
    fn the_cgroup_wins_for_cpu_time_when_both_readings_have_it() {
        let start = sample(0, vec![((10, 1), proc(100, 0, 0, &[(10, 0, 0)], None))], Some((1_000_000, 0)));
        let end = sample(10, vec![((10, 1), proc(150, 0, 0, &[(10, 50, 0)], None))], Some((6_000_000, 250_000)));
        let u = tree_usage(&start, &end, 100.0);
        assert_eq!((u.cpu_user_s, u.cpu_system_s, u.cpu_source), (5.0, 0.25, SOURCE_CGROUP_CPU));
        assert_eq!(u.read_bytes, None, "no I/O figure when the kernel gave none");
        let pid_reused = sample(10, vec![((10, 777), proc(5, 0, 0, &[(10, 3, 0)], None))], None);
        let u = tree_usage(&start, &pid_reused, 100.0);
        assert_eq!((u.cpu_user_s, u.voluntary), (0.05, 3), "a reused pid is a new process");
    }
}
