//! A long-running program on this machine: its own process group, a cgroup v2 when
//! one can be made, stopped as a whole tree.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use super::api::{ExitInfo, RunningProcess, SpawnSpec, TransportError};

/// How long a stopped tree's cgroup is given to empty before it is left behind.
const CGROUP_DRAIN: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub struct LocalProcess {
    host: String,
    pid: u32,
    cgroup: Option<PathBuf>,
    cgroup_note: Option<String>,
    child: tokio::sync::Mutex<Child>,
    ended: Mutex<Option<ExitInfo>>,
}

impl LocalProcess {
    /// Starts `spec`. A cgroup that cannot be created or joined is not an error: the
    /// program then runs in its process group only, and `cgroup_note` says why.
    pub async fn spawn(host: &str, spec: &SpawnSpec) -> Result<LocalProcess, TransportError> {
        let mut note = None;
        let mut cgroup = None;
        if let Some(dir) = &spec.cgroup {
            if let Some(parent) = dir.parent() {
                reap_once(parent);
            }
            match std::fs::create_dir(dir) {
                Ok(()) => cgroup = Some(dir.clone()),
                Err(e) => note = Some(format!("cannot create cgroup {}: {e}", dir.display())),
            }
        }
        let child = match start(spec, cgroup.as_deref()) {
            Ok(c) => c,
            Err(e) if cgroup.is_some() => {
                // Joining failed (permissions, a cgroup with controllers): fall back to the group.
                let dir = cgroup.take().expect("checked");
                let _ = std::fs::remove_dir(&dir);
                note = Some(format!("cannot start in cgroup {}: {e}", dir.display()));
                start(spec, None).map_err(|source| spawn_error(host, spec, source))?
            }
            Err(source) => return Err(spawn_error(host, spec, source)),
        };
        let pid = child.id().ok_or_else(|| TransportError::Process {
            host: host.into(),
            what: format!("`{}` has no pid right after start", spec.cmd.display()),
            source: std::io::Error::other("exited and reaped"),
        })?;
        Ok(LocalProcess {
            host: host.into(),
            pid,
            cgroup,
            cgroup_note: note,
            child: tokio::sync::Mutex::new(child),
            ended: Mutex::new(None),
        })
    }

    /// Sends `sig` to the process group and to every process of the cgroup (which may
    /// have left the group). A process that is already gone is not an error.
    fn signal_tree(&self, sig: Signal) {
        let _ = killpg(Pid::from_raw(self.pid as i32), sig);
        let Some(cg) = &self.cgroup else { return };
        // cgroup.kill (Linux 5.14+) kills every process of the cgroup, even one that is forking.
        if sig == Signal::SIGKILL && std::fs::write(cg.join("cgroup.kill"), "1").is_ok() {
            return;
        }
        for pid in cgroup_pids(cg) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), sig);
        }
    }

    /// Waits (briefly) for the cgroup to empty, then removes it.
    async fn remove_cgroup(&self) {
        let Some(cg) = &self.cgroup else { return };
        let deadline = tokio::time::Instant::now() + CGROUP_DRAIN;
        // Only after the soak, while the tree dies: a short poll is harmless here.
        while !cgroup_pids(cg).is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = std::fs::remove_dir(cg);
    }

    fn error(&self, what: &str, source: std::io::Error) -> TransportError {
        TransportError::Process { host: self.host.clone(), what: format!("process {}: {what}", self.pid), source }
    }
}

#[async_trait]
impl RunningProcess for LocalProcess {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_deref()
    }

    fn cgroup_note(&self) -> Option<&str> {
        self.cgroup_note.as_deref()
    }

    async fn exited(&self) -> Result<Option<ExitInfo>, TransportError> {
        if let Some(e) = *self.ended.lock().unwrap_or_else(PoisonError::into_inner) {
            return Ok(Some(e));
        }
        let mut child = self.child.lock().await;
        child.try_wait().map(|s| s.map(exit_info)).map_err(|e| self.error("checking whether it exited", e))
    }

    async fn stop(&self, grace: Duration) -> Result<ExitInfo, TransportError> {
        if let Some(e) = *self.ended.lock().unwrap_or_else(PoisonError::into_inner) {
            return Ok(e);
        }
        let mut child = self.child.lock().await;
        let mut status = child.try_wait().map_err(|e| self.error("checking whether it exited", e))?;
        if status.is_none() {
            self.signal_tree(Signal::SIGTERM);
            if let Ok(r) = tokio::time::timeout(grace, child.wait()).await {
                status = Some(r.map_err(|e| self.error("waiting for it", e))?);
            }
        }
        // Whatever is left of the tree (children that ignored SIGTERM, or outlived the leader).
        self.signal_tree(Signal::SIGKILL);
        let status = match status {
            Some(s) => s,
            None => child.wait().await.map_err(|e| self.error("waiting for it after SIGKILL", e))?,
        };
        drop(child);
        self.remove_cgroup().await;
        let info = exit_info(status);
        *self.ended.lock().unwrap_or_else(PoisonError::into_inner) = Some(info);
        Ok(info)
    }
}

impl Drop for LocalProcess {
    /// A handle dropped without `stop` (a cancelled trial) must not leave the tree running.
    fn drop(&mut self) {
        if self.ended.lock().unwrap_or_else(PoisonError::into_inner).is_some() {
            return;
        }
        self.signal_tree(Signal::SIGKILL);
        if let Some(cg) = &self.cgroup {
            // The processes die asynchronously; give them a moment before removing the folder.
            for _ in 0..20 {
                if cgroup_pids(cg).is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = std::fs::remove_dir(cg);
        }
    }
}

fn spawn_error(host: &str, spec: &SpawnSpec, source: std::io::Error) -> TransportError {
    TransportError::Spawn { host: host.into(), command: spec.cmd.display(), source }
}

fn exit_info(s: ExitStatus) -> ExitInfo {
    ExitInfo { code: s.code(), signal: s.signal() }
}

fn cgroup_pids(cg: &Path) -> Vec<i32> {
    std::fs::read_to_string(cg.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

fn output(path: &Option<PathBuf>) -> std::io::Result<Stdio> {
    match path {
        None => Ok(Stdio::null()),
        Some(p) => {
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir)?;
            }
            Ok(Stdio::from(std::fs::File::create(p)?))
        }
    }
}

fn start(spec: &SpawnSpec, cgroup: Option<&Path>) -> std::io::Result<Child> {
    let mut c = Command::new(&spec.cmd.program);
    c.args(&spec.cmd.args)
        .envs(&spec.cmd.env)
        .stdin(Stdio::null())
        .stdout(output(&spec.stdout)?)
        .stderr(output(&spec.stderr)?)
        // Its own process group: the tree can be signalled as one, and a Ctrl-C at the
        // terminal reaches the lab (which stops the trial) rather than the app.
        .process_group(0);
    if let Some(dir) = &spec.cmd.cwd {
        c.current_dir(dir);
    }
    let procs = match cgroup {
        Some(cg) => Some(
            CString::new(cg.join("cgroup.procs").as_os_str().as_bytes())
                .map_err(|_| std::io::Error::other("cgroup path contains a NUL byte"))?,
        ),
        None => None,
    };
    let lab = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe calls (prctl, getppid, getpid, open, write, close) on memory
    // prepared before the fork.
    unsafe {
        c.pre_exec(move || {
            // If the lab dies without stopping the app (kill -9, a second Ctrl-C), the app dies
            // too. (The signal comes when the forking thread ends: a tokio worker, which
            // lives as long as the runtime.)
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != lab {
                return Err(std::io::Error::other("the lab exited while the app was starting"));
            }
            match &procs {
                Some(p) => join_cgroup(p),
                None => Ok(()),
            }
        });
    }
    c.spawn()
}

/// Reaps stale cgroups under `base` the first time this process uses it.
fn reap_once(base: &Path) {
    static SEEN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    if !seen.iter().any(|p| p == base) {
        seen.push(base.to_path_buf());
        reap_stale_cgroups(base);
    }
}

/// Ends what crashed lab processes left in cgroups under `base` (`lab-<pid>-…` whose
/// pid is gone): kills their processes and removes the folders. Best effort.
pub fn reap_stale_cgroups(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("lab-").and_then(|r| r.split('-').next()).and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let alive = nix::sys::signal::kill(Pid::from_raw(pid), None).is_ok();
        if alive || pid == std::process::id() as i32 {
            continue;
        }
        let dir = e.path();
        if std::fs::write(dir.join("cgroup.kill"), "1").is_err() {
            for p in cgroup_pids(&dir) {
                let _ = nix::sys::signal::kill(Pid::from_raw(p), Signal::SIGKILL);
            }
        }
        for _ in 0..50 {
            if cgroup_pids(&dir).is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir(&dir);
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`, before
/// exec, so every process the program starts is born inside it. No allocation: this
/// runs between fork and exec.
fn join_cgroup(procs: &CStr) -> std::io::Result<()> {
    let mut buf = [0u8; 20];
    // getpid(2) is async-signal-safe, as this moment between fork and exec needs.
    let mut n = u64::from(std::process::id());
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // SAFETY: `procs` is a valid C string; the fd is closed on every path.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, buf[i..].as_ptr().cast(), buf.len() - i);
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if written < 0 {
            return Err(err);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{CommandSpec, LocalTransport, Transport};

    fn sh(script: &str) -> SpawnSpec {
        SpawnSpec { cmd: CommandSpec::new("sh", &["-c", script]), stdout: None, stderr: None, cgroup: None }
    }

    fn alive(pid: i32) -> bool {
        // A zombie still answers kill(0); look at its state instead.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
            .unwrap_or(false)
    }

    #[tokio::test]
    async fn stop_ends_the_whole_process_group_even_children_that_ignore_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        let script =
            format!("sh -c 'trap \"\" TERM; echo $$ > {}; while :; do sleep 1; done' & wait", pidfile.display());
        let t = LocalTransport::new("local");
        let p = t.spawn(&sh(&script)).await.unwrap();
        let mut child = None;
        for _ in 0..200 {
            if let Some(pid) = std::fs::read_to_string(&pidfile).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
                child = Some(pid);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let child = child.expect("the grandchild wrote its pid");
        assert!(alive(child));
        assert_eq!(p.exited().await.unwrap(), None);
        let info = p.stop(Duration::from_millis(300)).await.unwrap();
        assert!(info.signal.is_some() || info.code.is_some(), "{info}");
        for _ in 0..100 {
            if !alive(child) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!alive(child), "a child that ignores SIGTERM is killed with the tree");
        assert_eq!(p.stop(Duration::from_millis(10)).await.unwrap(), info, "stop is idempotent");
    }

    #[tokio::test]
    async fn early_exit_is_seen_and_a_missing_program_is_a_spawn_error() {
        let t = LocalTransport::new("local");
        let p = t.spawn(&sh("exit 3")).await.unwrap();
        let mut ended = None;
        for _ in 0..200 {
            ended = p.exited().await.unwrap();
            if ended.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(ended, Some(ExitInfo { code: Some(3), signal: None }));
        let mut missing = sh("");
        missing.cmd = CommandSpec::new("/nonexistent/lab-app", &[]);
        let e = t.spawn(&missing).await.err().expect("a missing program cannot start");
        assert!(matches!(e, TransportError::Spawn { .. }), "{e}");
        assert!(e.to_string().contains("/nonexistent/lab-app"), "{e}");
    }

    #[tokio::test]
    async fn output_goes_to_files_and_an_impossible_cgroup_falls_back_to_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = sh("echo out; echo err >&2");
        spec.stdout = Some(dir.path().join("logs/out.txt"));
        spec.stderr = Some(dir.path().join("logs/err.txt"));
        // A folder in a missing parent cannot be created: the program still runs.
        spec.cgroup = Some(dir.path().join("no/such/cgroup"));
        let t = LocalTransport::new("local");
        let p = t.spawn(&spec).await.unwrap();
        assert_eq!(p.cgroup(), None);
        assert!(p.cgroup_note().unwrap().contains("cannot create cgroup"));
        for _ in 0..200 {
            if p.exited().await.unwrap().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        p.stop(Duration::from_millis(100)).await.unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("logs/out.txt")).unwrap(), "out\n");
        assert_eq!(std::fs::read_to_string(dir.path().join("logs/err.txt")).unwrap(), "err\n");
    }

    /// A crashed lab's cgroup (its pid is gone) is emptied and removed; a live one is not.
    #[test]
    fn stale_cgroups_of_dead_labs_are_reaped() {
        let Some(base) = super::super::cgroup::writable_own_cgroup() else {
            return; // no writable cgroup v2 here: nothing to reap
        };
        // pid_max is at most 2^22: this pid cannot exist.
        let stale = base.join(format!("lab-{}-gone-0", i32::MAX - 1));
        let live = base.join(format!("lab-{}-alive-test-0", std::process::id()));
        for d in [&stale, &live] {
            std::fs::create_dir(d).unwrap();
        }
        let mut orphan = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::write(stale.join("cgroup.procs"), orphan.id().to_string()).unwrap();
        reap_stale_cgroups(&base);
        let status = orphan.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "the stale cgroup's process was killed");
        assert!(!stale.exists(), "the stale cgroup was removed");
        assert!(live.exists(), "a live lab's cgroup is left alone");
        std::fs::remove_dir(&live).unwrap();
    }

    #[tokio::test]
    async fn reads_kernel_files_and_lists_folders() {
        let t = LocalTransport::new("local");
        let stat = t.read_file(Path::new("/proc/self/stat")).await.unwrap();
        assert!(!stat.is_empty(), "procfs files report size 0 but have content");
        let names = t.list_dir(Path::new("/proc/self/task")).await.unwrap();
        assert!(!names.is_empty());
        let e = t.read_file(Path::new("/proc/999999999/stat")).await.unwrap_err();
        assert!(e.is_not_found(), "{e}");
    }
}
