//! One reading of the kernel's accounting for an app's whole process tree.
//!
//! Taken twice per trial, at the start and at the end of the soak; the difference is
//! what the app cost (`usage.rs`). Nothing is polled in between.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::collect::procfs::{
    CgroupCpu, PidIo, PidStat, PidStatus, parse_cgroup_cpu_stat, parse_pid_io, parse_pid_list, parse_pid_stat,
    parse_pid_status,
};
use crate::transport::{Transport, TransportError};

/// Which processes make up the app.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeRef {
    /// The process the lab started; its pid is also the tree's process group id.
    pub leader: u32,
    /// The cgroup every process of the tree was born in, when one could be made.
    pub cgroup: Option<PathBuf>,
}

/// A process, identified by pid and start time (pids are reused).
pub type ProcKey = (u32, u64);

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProcSample {
    pub stat: PidStat,
    /// Peak RSS of the process (the leader thread's `status`).
    pub vm_hwm_kb: Option<u64>,
    /// Storage I/O; `None` when the kernel would not tell (another user's process).
    pub io: Option<PidIo>,
    /// Context switches per thread id.
    pub threads: BTreeMap<u32, PidStatus>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct TreeSample {
    /// Device-clock time of the reading.
    pub at: Duration,
    /// The cgroup's CPU time (every process that ever ran in it, exited ones included).
    pub cgroup_cpu: Option<CgroupCpu>,
    pub procs: BTreeMap<ProcKey, ProcSample>,
    /// Every file read, verbatim, in the order read: kept as the trial's raw evidence.
    pub raw: Vec<(PathBuf, String)>,
}

impl TreeSample {
    /// The raw files as one text: `==> path <==` headers, like `tail` prints them.
    pub fn raw_text(&self, title: &str) -> String {
        let mut out = format!("# {title}\n");
        for (p, text) in &self.raw {
            out.push_str(&format!("==> {} <==\n{}", p.display(), text));
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }
}

/// Reads files of one host through its transport, remembering each one verbatim.
struct Reader<'a> {
    t: &'a dyn Transport,
    raw: Vec<(PathBuf, String)>,
}

impl Reader<'_> {
    /// A file's text; `None` when it is gone (the process exited meanwhile) or unreadable.
    async fn read(&mut self, path: PathBuf) -> Result<Option<String>, TransportError> {
        match self.t.read_file(&path).await {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                self.raw.push((path, text.clone()));
                Ok(Some(text))
            }
            Err(e @ TransportError::Read { .. }) => {
                if !e.is_not_found() {
                    self.raw.push((path, format!("(unreadable: {e})\n")));
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

/// Reads the tree's accounting now. `proc_root` is `/proc` (a test may point elsewhere).
pub async fn sample(t: &dyn Transport, proc_root: &Path, tree: &TreeRef, at: Duration) -> Result<TreeSample, String> {
    let mut r = Reader { t, raw: Vec::new() };
    let fail = |e: TransportError| e.to_string();
    let mut out = TreeSample { at, ..TreeSample::default() };

    let pids: Vec<u32> = match &tree.cgroup {
        Some(cg) => {
            out.cgroup_cpu = match r.read(cg.join("cpu.stat")).await.map_err(fail)? {
                Some(text) => Some(parse_cgroup_cpu_stat(&text).map_err(|e| e.to_string())?),
                None => None,
            };
            r.read(cg.join("cgroup.procs")).await.map_err(fail)?.map(|t| parse_pid_list(&t)).unwrap_or_default()
        }
        None => group_members(t, proc_root, tree.leader).await.map_err(fail)?,
    };

    for pid in pids {
        let dir = proc_root.join(pid.to_string());
        let Some(stat_text) = r.read(dir.join("stat")).await.map_err(fail)? else { continue };
        let Ok(stat) = parse_pid_stat(&stat_text) else { continue };
        let vm_hwm_kb = match r.read(dir.join("status")).await.map_err(fail)? {
            Some(s) => parse_pid_status(&s).ok().and_then(|s| s.vm_hwm_kb),
            None => None,
        };
        let io = r.read(dir.join("io")).await.map_err(fail)?.and_then(|s| parse_pid_io(&s).ok());
        let mut threads = BTreeMap::new();
        let tids = match t.list_dir(&dir.join("task")).await {
            Ok(names) => names.iter().filter_map(|n| n.parse::<u32>().ok()).collect(),
            Err(_) => Vec::new(),
        };
        for tid in tids {
            let path = dir.join("task").join(tid.to_string()).join("status");
            if let Some(s) = r.read(path).await.map_err(fail)?
                && let Ok(st) = parse_pid_status(&s)
            {
                threads.insert(tid, st);
            }
        }
        out.procs.insert((pid, stat.starttime), ProcSample { stat, vm_hwm_kb, io, threads });
    }
    out.raw = r.raw;
    Ok(out)
}

/// Processes whose process group is `pgid`: every `/proc/<pid>/stat` is looked at.
async fn group_members(t: &dyn Transport, proc_root: &Path, pgid: u32) -> Result<Vec<u32>, TransportError> {
    let mut out = Vec::new();
    for name in t.list_dir(proc_root).await? {
        let Ok(pid) = name.parse::<u32>() else { continue };
        let Ok(bytes) = t.read_file(&proc_root.join(&name).join("stat")).await else { continue };
        if parse_pid_stat(&String::from_utf8_lossy(&bytes)).is_ok_and(|s| s.pgrp == pgid) {
            out.push(pid);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::LocalTransport;

    #[tokio::test]
    async fn reads_this_process_group_from_the_real_proc() {
        // The test process leads no group of its own, so find the group it is in.
        let me = std::process::id();
        let stat = parse_pid_stat(&std::fs::read_to_string("/proc/self/stat").unwrap()).unwrap();
        let t = LocalTransport::new("local");
        let s = sample(&t, Path::new("/proc"), &TreeRef { leader: stat.pgrp, cgroup: None }, Duration::from_secs(1))
            .await
            .unwrap();
        let mine = s.procs.iter().find(|((pid, _), _)| *pid == me).expect("this process is in its own group").1;
        assert!(mine.threads.len() >= 2, "the test harness runs several threads: {:?}", mine.threads.keys());
        assert!(mine.vm_hwm_kb.unwrap() > 0);
        assert!(s.raw_text("test").contains(&format!("==> /proc/{me}/stat <==")));
        assert_eq!(s.cgroup_cpu, None);
    }
}
