//! One reading of the kernel's accounting for an app's whole process tree.
//!
//! Taken twice per trial, at the start and at the end of the soak; the difference is
//! what the app cost (`usage.rs`). Nothing is polled in between.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::collect::linux::procfs::{
    CgroupCpu, PidIo, PidStat, PidStatus, parse_cgroup_cpu_stat, parse_pid_io, parse_pid_list, parse_pid_stat,
    parse_pid_status,
};
use crate::transport::{CommandSpec, Transport, TransportError};

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

/// Ends a file in `read_many`'s output; `MISSING` stands for a file that could not be read.
/// The record-separator byte never appears in /proc's text files.
const END: &str = "\u{1e}lab-end\u{1e}";
const MISSING: &str = "\u{1e}lab-missing\u{1e}";

/// Cats each file named in its arguments, each followed by an end marker (or a
/// missing marker): one command for many files, however far away the host is.
const CAT_MANY: &str = r#"for f; do if [ -r "$f" ] && cat -- "$f" 2>/dev/null; then printf '\n\036lab-end\036\n'; else printf '\036lab-missing\036\n'; fi; done"#;

/// Splits `read_many`'s output into one entry per file, in order.
fn split_many(text: &str, n: usize) -> Vec<Option<String>> {
    let mut out = Vec::with_capacity(n);
    let mut rest = text;
    for _ in 0..n {
        if let Some(after) = rest.strip_prefix(MISSING) {
            out.push(None);
            rest = after.strip_prefix('\n').unwrap_or(after);
            continue;
        }
        let marker = format!("\n{END}\n");
        match rest.find(&marker) {
            Some(i) => {
                out.push(Some(rest[..i].to_string()));
                rest = &rest[i + marker.len()..];
            }
            None => out.push(None),
        }
    }
    out
}

impl Reader<'_> {
    /// One file's text; `None` when it is gone (the process exited meanwhile) or unreadable.
    async fn read(&mut self, path: PathBuf) -> Result<Option<String>, TransportError> {
        Ok(self.read_many(std::slice::from_ref(&path)).await?.pop().flatten())
    }

    /// Many files at once (one command on the host); `None` for each that is gone.
    async fn read_many(&mut self, paths: &[PathBuf]) -> Result<Vec<Option<String>>, TransportError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmd = CommandSpec::new("sh", &["-c", CAT_MANY, "sh"]);
        cmd.args.extend(paths.iter().map(|p| p.display().to_string()));
        let out = self.t.exec(&cmd).await?;
        let texts = split_many(&String::from_utf8_lossy(&out.stdout), paths.len());
        for (p, t) in paths.iter().zip(&texts) {
            if let Some(t) = t {
                self.raw.push((p.clone(), t.clone()));
            }
        }
        Ok(texts)
    }
}

/// Why a reading of the tree's accounting failed.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// The host could not be asked (a lost connection is one of these).
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("{0}")]
    Parse(String),
}

/// Reads the tree's accounting now. `proc_root` is `/proc` (a test may point elsewhere).
pub async fn sample(
    t: &dyn Transport,
    proc_root: &Path,
    tree: &TreeRef,
    at: Duration,
) -> Result<TreeSample, SampleError> {
    let mut r = Reader { t, raw: Vec::new() };
    let fail = SampleError::Transport;
    let mut out = TreeSample { at, ..TreeSample::default() };

    let pids: Vec<u32> = match &tree.cgroup {
        Some(cg) => {
            out.cgroup_cpu = match r.read(cg.join("cpu.stat")).await.map_err(fail)? {
                Some(text) => Some(parse_cgroup_cpu_stat(&text).map_err(|e| SampleError::Parse(e.to_string()))?),
                None => None,
            };
            r.read(cg.join("cgroup.procs")).await.map_err(fail)?.map(|t| parse_pid_list(&t)).unwrap_or_default()
        }
        None => group_members(t, proc_root, tree.leader).await.map_err(fail)?,
    };

    // Three commands whatever the tree's size: the members' files, their threads, and
    // the threads' files (the host may be a network round trip away).
    let mut files = Vec::new();
    for pid in &pids {
        let dir = proc_root.join(pid.to_string());
        files.extend([dir.join("stat"), dir.join("status"), dir.join("io")]);
    }
    let texts = r.read_many(&files).await.map_err(fail)?;
    let tasks = thread_ids(t, proc_root, &pids).await.map_err(fail)?;
    let task_files: Vec<PathBuf> = tasks
        .iter()
        .flat_map(|(pid, tids)| {
            tids.iter()
                .map(move |tid| proc_root.join(pid.to_string()).join("task").join(tid.to_string()).join("status"))
        })
        .collect();
    let task_texts = r.read_many(&task_files).await.map_err(fail)?;
    let mut task_iter = task_files.iter().zip(task_texts);

    for (k, pid) in pids.iter().enumerate() {
        let tids = tasks.iter().find(|(p, _)| p == pid).map(|(_, t)| t.len()).unwrap_or(0);
        let mine: Vec<_> = task_iter.by_ref().take(tids).collect();
        let Some(Some(stat_text)) = texts.get(3 * k) else { continue };
        let Ok(stat) = parse_pid_stat(stat_text) else { continue };
        let vm_hwm_kb =
            texts.get(3 * k + 1).cloned().flatten().and_then(|s| parse_pid_status(&s).ok().and_then(|s| s.vm_hwm_kb));
        let io = texts.get(3 * k + 2).cloned().flatten().and_then(|s| parse_pid_io(&s).ok());
        let mut threads = BTreeMap::new();
        for (path, text) in mine {
            let tid = path.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str()).and_then(|n| n.parse().ok());
            if let (Some(tid), Some(text)) = (tid, text)
                && let Ok(st) = parse_pid_status(&text)
            {
                threads.insert(tid, st);
            }
        }
        out.procs.insert((*pid, stat.starttime), ProcSample { stat, vm_hwm_kb, io, threads });
    }
    out.raw = r.raw;
    Ok(out)
}

/// Processes whose process group is `pgid`: every `/proc/<pid>/stat`, read in one command.
async fn group_members(t: &dyn Transport, proc_root: &Path, pgid: u32) -> Result<Vec<u32>, TransportError> {
    let cmd = CommandSpec {
        args: vec![
            "-c".into(),
            r#"cat "$1"/[0-9]*/stat 2>/dev/null; true"#.into(),
            "sh".into(),
            proc_root.display().to_string(),
        ],
        ..CommandSpec::new("sh", &[])
    };
    let out = t.exec(&cmd).await?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            // A stat line starts with the pid.
            let pid = l.split_whitespace().next()?.parse::<u32>().ok()?;
            parse_pid_stat(l).ok().filter(|s| s.pgrp == pgid).map(|_| pid)
        })
        .collect())
}

/// The thread ids of each process, in one command.
async fn thread_ids(t: &dyn Transport, proc_root: &Path, pids: &[u32]) -> Result<Vec<(u32, Vec<u32>)>, TransportError> {
    if pids.is_empty() {
        return Ok(Vec::new());
    }
    let mut cmd = CommandSpec::new(
        "sh",
        &[
            "-c",
            r#"root=$1; shift; for p; do printf '%s:' "$p"; ls -1 "$root/$p/task" 2>/dev/null | tr '\n' ' '; echo; done"#,
            "sh",
        ],
    );
    cmd.args.push(proc_root.display().to_string());
    cmd.args.extend(pids.iter().map(|p| p.to_string()));
    let out = t.exec(&cmd).await?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (pid, tids) = l.split_once(':')?;
            Some((pid.trim().parse().ok()?, tids.split_whitespace().filter_map(|x| x.parse().ok()).collect()))
        })
        .collect())
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
