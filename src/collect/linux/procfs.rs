//! Parsers of the Linux kernel's accounting files the host backend reads (proc(5),
//! cgroups(7)): pure functions of text.
//!
//! Field positions follow proc_pid_stat(5) (through [`crate::collect::linux::proc_stat`]),
//! proc_pid_status(5), proc_pid_io(5) and the cgroup v2 documentation
//! (Documentation/admin-guide/cgroup-v2.rst, "cpu.stat").

use std::path::PathBuf;

use crate::collect::linux::proc_stat;
use crate::collect::parse_error::ParseError;
use crate::collect::text::{end_line, number, numbered};

/// What `/proc/<pid>/stat` says about one process (or `/proc/<pid>/task/<tid>/stat` about a thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PidStat {
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    /// CPU time in clock ticks (USER_HZ): the process's threads, live and dead.
    pub utime: u64,
    pub stime: u64,
    /// CPU time of children this process has waited for.
    pub cutime: u64,
    pub cstime: u64,
    /// Start time after boot, in clock ticks: with the pid, identifies the process (pids are reused).
    pub starttime: u64,
}

/// Parses `/proc/<pid>/stat` (with [`proc_stat::parse`]), keeping what the tree needs.
pub fn parse_pid_stat(text: &str) -> Result<PidStat, ParseError> {
    let p = proc_stat::parse(text)?;
    let missing = |what: &str| ParseError::at(1, format!("the line ends before field {what}"));
    Ok(PidStat {
        state: p.state.chars().next().ok_or_else(|| missing("3 (state)"))?,
        ppid: p.ppid.ok_or_else(|| missing("4 (ppid)"))?.max(0) as u32,
        pgrp: p.pgrp.ok_or_else(|| missing("5 (pgrp)"))?.max(0) as u32,
        utime: p.utime_ticks,
        stime: p.stime_ticks,
        cutime: p.cutime_ticks.ok_or_else(|| missing("16 (cutime)"))?,
        cstime: p.cstime_ticks.ok_or_else(|| missing("17 (cstime)"))?,
        starttime: p.start_time_ticks.ok_or_else(|| missing("22 (starttime)"))?,
    })
}

/// The lines of `/proc/<pid>/status` the lab uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PidStatus {
    /// Times the task gave up the CPU waiting for something (a wakeup follows each).
    pub voluntary_ctxt_switches: u64,
    /// Times the scheduler took the CPU away.
    pub nonvoluntary_ctxt_switches: u64,
    /// Peak resident set size, kB; absent for kernel threads and zombies.
    pub vm_hwm_kb: Option<u64>,
}

pub fn parse_pid_status(text: &str) -> Result<PidStatus, ParseError> {
    let mut out = PidStatus::default();
    let (mut vol, mut nonvol) = (None, None);
    for (n, line) in numbered(text) {
        let Some((key, value)) = line.split_once(':') else { continue };
        let first = value.split_whitespace().next().unwrap_or("");
        match key {
            "voluntary_ctxt_switches" => vol = Some(number(n, key, first)?),
            "nonvoluntary_ctxt_switches" => nonvol = Some(number(n, key, first)?),
            "VmHWM" => out.vm_hwm_kb = Some(number(n, key, first)?),
            _ => {}
        }
    }
    let missing = |key: &str| ParseError::at(end_line(text), format!("no {key} line in /proc/<pid>/status"));
    out.voluntary_ctxt_switches = vol.ok_or_else(|| missing("voluntary_ctxt_switches"))?;
    out.nonvoluntary_ctxt_switches = nonvol.ok_or_else(|| missing("nonvoluntary_ctxt_switches"))?;
    Ok(out)
}

/// `/proc/<pid>/io`: bytes the process (all its threads, live and dead) caused to be
/// fetched from and sent to the storage layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PidIo {
    pub read_bytes: u64,
    pub write_bytes: u64,
}

pub fn parse_pid_io(text: &str) -> Result<PidIo, ParseError> {
    Ok(PidIo {
        read_bytes: key_value(text, "read_bytes", ':', "/proc/<pid>/io")?,
        write_bytes: key_value(text, "write_bytes", ':', "/proc/<pid>/io")?,
    })
}

/// A cgroup v2 `cpu.stat`: CPU time of every process that ever ran in the cgroup, in µs.
/// The file is there whether or not the cpu controller is enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CgroupCpu {
    pub usage_usec: u64,
    pub user_usec: u64,
    pub system_usec: u64,
}

pub fn parse_cgroup_cpu_stat(text: &str) -> Result<CgroupCpu, ParseError> {
    let get = |k: &str| key_value(text, k, ' ', "cpu.stat");
    Ok(CgroupCpu { usage_usec: get("usage_usec")?, user_usec: get("user_usec")?, system_usec: get("system_usec")? })
}

/// The 1-minute load average from `/proc/loadavg`.
pub fn parse_loadavg(text: &str) -> Result<f64, ParseError> {
    number(1, "the 1-minute load average", text.split_whitespace().next().unwrap_or(""))
}

/// Where the cgroup v2 hierarchy is mounted, from `/proc/self/mounts`
/// (`/sys/fs/cgroup` on unified systems, `/sys/fs/cgroup/unified` on hybrid ones).
pub fn cgroup2_mount(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 3 && f[2] == "cgroup2").then(|| PathBuf::from(unescape_mount(f[1])))
    })
}

/// This process's cgroup v2 path, from `/proc/self/cgroup` (the `0::/path` line).
pub fn own_cgroup2(proc_self_cgroup: &str) -> Option<String> {
    proc_self_cgroup.lines().find_map(|l| l.strip_prefix("0::").map(str::to_string))
}

/// The pids listed in a `cgroup.procs` file.
pub fn parse_pid_list(text: &str) -> Vec<u32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// `/proc/<pid>/task/<tid>/schedstat`: time on the CPU in ns (first field), at
/// nanosecond resolution where `stat` has clock ticks.
pub fn parse_schedstat_ns(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// `key<sep>value` lines: the first number after `key`; a missing key points past the end.
fn key_value(text: &str, key: &str, sep: char, file: &str) -> Result<u64, ParseError> {
    for (n, l) in numbered(text) {
        if let Some((k, v)) = l.split_once(sep)
            && k.trim() == key
        {
            return number(n, key, v.split_whitespace().next().unwrap_or(""));
        }
    }
    Err(ParseError::at(end_line(text), format!("no {key} line in {file}")))
}

/// Mount points escape spaces and tabs as octal (`\040`).
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        // A command name with spaces and a `)` (real stat line of `sleep`, name changed).
        let text = "4242 (my (evil) app) S 4241 4242 4000 34816 4242 4194304 120 0 0 0 \
                    731 42 9 3 20 0 1 0 123456 8601600 230 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_pid_stat(text).unwrap();
        assert_eq!(
            s,
            PidStat {
                state: 'S',
                ppid: 4241,
                pgrp: 4242,
                utime: 731,
                stime: 42,
                cutime: 9,
                cstime: 3,
                starttime: 123456
            }
        );
        assert!(parse_pid_stat("4242 (x) S 1 2").is_err());
        assert!(parse_pid_stat("garbage").is_err());
    }

    #[test]
    fn own_stat_parses() {
        let s = parse_pid_stat(&std::fs::read_to_string("/proc/self/stat").unwrap()).unwrap();
        assert!("RS".contains(s.state), "{s:?}");
        assert!(s.starttime > 0);
    }

    #[test]
    fn status_gives_context_switches_and_peak_rss() {
        let text = "Name:\tpinger\nState:\tS (sleeping)\nVmPeak:\t   10000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    2000 kB\n\
                    Threads:\t1\nvoluntary_ctxt_switches:\t1500\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(
            parse_pid_status(text).unwrap(),
            PidStatus { voluntary_ctxt_switches: 1500, nonvoluntary_ctxt_switches: 7, vm_hwm_kb: Some(2048) }
        );
        // Kernel threads have no VmHWM.
        let kthread = "Name:\tkworker\nvoluntary_ctxt_switches:\t3\nnonvoluntary_ctxt_switches:\t0\n";
        assert_eq!(parse_pid_status(kthread).unwrap().vm_hwm_kb, None);
        let e = parse_pid_status("Name:\tx\n").unwrap_err();
        assert_eq!(e.to_string(), "line 2: no voluntary_ctxt_switches line in /proc/<pid>/status");
        let e = parse_pid_status("voluntary_ctxt_switches:\tmany\n").unwrap_err();
        assert_eq!(e.to_string(), "line 1: voluntary_ctxt_switches: `many` is not a number");
    }

    #[test]
    fn io_and_cgroup_cpu_and_loadavg() {
        let io = "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_pid_io(io).unwrap(), PidIo { read_bytes: 4096, write_bytes: 8192 });
        let cpu = "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\nnice_usec 0\n";
        assert_eq!(
            parse_cgroup_cpu_stat(cpu).unwrap(),
            CgroupCpu { usage_usec: 1_500_000, user_usec: 1_000_000, system_usec: 500_000 }
        );
        assert!(parse_cgroup_cpu_stat("usage_usec 1\n").is_err());
        assert_eq!(parse_loadavg("0.42 0.30 0.20 1/100 5706\n").unwrap(), 0.42);
        assert!(parse_loadavg("").is_err());
        assert_eq!(parse_schedstat_ns("123456789 2000 15\n"), Some(123_456_789));
    }

    #[test]
    fn cgroup2_mount_and_own_cgroup() {
        let hybrid = "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
                      cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
        assert_eq!(cgroup2_mount(hybrid), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        let spaced = "cgroup2 /mnt/my\\040cgroups cgroup2 rw 0 0\n";
        assert_eq!(cgroup2_mount(spaced), Some(PathBuf::from("/mnt/my cgroups")));
        assert_eq!(cgroup2_mount("proc /proc proc rw 0 0\n"), None);
        assert_eq!(own_cgroup2("4:memory:/x\n0::/user.slice/lab.scope\n").as_deref(), Some("/user.slice/lab.scope"));
        assert_eq!(own_cgroup2("4:memory:/x\n"), None);
        assert_eq!(parse_pid_list("12\n13\n\n"), [12, 13]);
    }
}
