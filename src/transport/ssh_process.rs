//! A program started on an SSH host, detached from the connection.
//!
//! The program runs in a new session (`setsid`), so a dropped connection or a
//! restarted sshd does not hang it up: nothing about the soak depends on SSH. A small
//! wrapper shell waits for it and writes its exit code to a file, which is how the lab
//! learns how it ended. Config strings only ever travel as positional arguments of a
//! constant script, never inside it.
//!
//! When a cgroup v2 is asked for, the launcher makes it and moves itself into it before
//! it forks the wrapper, so the wrapper, the program and everything it starts are born
//! inside it (accounted and stopped together, even a process that calls `setsid`). A
//! cgroup that cannot be made or joined is not an error: the program then runs in its
//! process group only, and `cgroup_note` says why.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::api::{CommandSpec, ExitInfo, RunningProcess, SpawnSpec, Transport, TransportError};
use super::cgroup::end_cgroup;
use super::ssh::SshTransport;

/// `sh -c LAUNCH sh OUT ERR EXIT CGROUP PROGRAM ARGS…`: when CGROUP is not empty, makes
/// that cgroup and moves itself into it; then starts `PROGRAM ARGS…` in a new session
/// with its output in OUT and ERR, records its exit code in EXIT, and prints the session's
/// pid and `cg` (in the cgroup), `nocg create WHY` / `nocg join WHY` (not), or nothing
/// (none asked for). A folder without `cgroup.procs` is not in a cgroup v2 hierarchy
/// (a plain folder would take the pid into a new regular file).
const LAUNCH: &str = r#"out=$1; err=$2; ex=$3; cg=$4; shift 4; rm -f "$ex"; st=
if [ -n "$cg" ]; then
  if ! why=$(mkdir -- "$cg" 2>&1); then st="nocg create $why"
  elif [ ! -e "$cg/cgroup.procs" ]; then rmdir -- "$cg"; st="nocg join not a cgroup v2 folder (no cgroup.procs)"
  elif why=$(env echo $$ 2>&1 >"$cg/cgroup.procs"); then st=cg
  else rmdir -- "$cg"; st="nocg join $why"; fi
fi
setsid sh -c 'o=$1; e=$2; x=$3; shift 3; "$@" >"$o" 2>"$e" </dev/null; echo $? >"$x.tmp" && mv "$x.tmp" "$x"' sh "$out" "$err" "$ex" "$@" >/dev/null 2>&1 </dev/null & echo "$! $st""#;

/// `sh -c SIGNAL sh SIG PGID CGROUP`: sends SIG to the process group and, when CGROUP is
/// not empty, to every process of the cgroup (one may have left the group). A process
/// already gone is not an error.
const SIGNAL: &str = r#"kill -s "$1" -- "-$2" 2>/dev/null; if [ -n "$3" ]; then for p in $(cat -- "$3/cgroup.procs" 2>/dev/null); do kill -s "$1" "$p" 2>/dev/null; done; fi; true"#;

pub struct SshProcess {
    transport: SshTransport,
    pid: u32,
    exit_file: PathBuf,
    /// The cgroup the tree was born in, when one could be made.
    cgroup: Option<PathBuf>,
    /// Why there is no cgroup, when one was asked for and could not be made or joined.
    cgroup_note: Option<String>,
    /// Set once the tree was stopped (a stop is idempotent).
    stopped: Mutex<Option<ExitInfo>>,
}

impl SshProcess {
    pub async fn spawn(transport: &SshTransport, spec: &SpawnSpec) -> Result<SshProcess, TransportError> {
        let host = transport.host().to_string();
        // The exit file sits beside the output, or in /tmp when the output is discarded.
        let base =
            spec.stdout.as_ref().and_then(|p| p.parent().map(Path::to_path_buf)).unwrap_or_else(|| "/tmp".into());
        let nonce = format!("lab-exit-{}-{}", std::process::id(), rand_suffix());
        let exit_file = base.join(nonce);
        let dev_null = PathBuf::from("/dev/null");
        let mut cmd = CommandSpec::new("sh", &["-c", LAUNCH, "sh"]);
        cmd.args.push(spec.stdout.as_ref().unwrap_or(&dev_null).display().to_string());
        cmd.args.push(spec.stderr.as_ref().unwrap_or(&dev_null).display().to_string());
        cmd.args.push(exit_file.display().to_string());
        cmd.args.push(spec.cgroup.as_ref().map(|c| c.display().to_string()).unwrap_or_default());
        cmd.args.push(spec.cmd.program.clone());
        cmd.args.extend(spec.cmd.args.iter().cloned());
        cmd.env = spec.cmd.env.clone();
        cmd.cwd = spec.cmd.cwd.clone();
        cmd.timeout = Duration::from_secs(30);
        let out = transport.exec(&cmd).await?;
        let text = out.stdout_text();
        let (pid, status) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
        let pid = pid.parse::<u32>().map_err(|_| TransportError::Spawn {
            host: host.clone(),
            command: spec.cmd.display(),
            source: std::io::Error::other(format!("no pid from the launcher: {}", out.stderr_text().trim())),
        })?;
        let (cgroup, cgroup_note) = match (&spec.cgroup, cgroup_status(status)) {
            (Some(dir), CgroupStatus::Joined) => (Some(dir.clone()), None),
            (Some(dir), CgroupStatus::NotCreated(why)) => {
                (None, Some(format!("cannot create cgroup {}: {why}", dir.display())))
            }
            (Some(dir), CgroupStatus::NotJoined(why)) => {
                (None, Some(format!("cannot start in cgroup {}: {why}", dir.display())))
            }
            _ => (None, None),
        };
        Ok(SshProcess { transport: transport.clone(), pid, exit_file, cgroup, cgroup_note, stopped: Mutex::new(None) })
    }

    /// Whether the leader still runs. A zombie does not: `kill -0` succeeds on one, and
    /// the detached leader's new parent (init, or a container's first process) may take
    /// its time to reap it, which made every stop wait out its whole grace.
    async fn alive(&self) -> Result<bool, TransportError> {
        let stat = format!("/proc/{}/stat", self.pid);
        match self.transport.read_file(Path::new(&stat)).await {
            Ok(text) => Ok(crate::collect::linux::procfs::parse_pid_stat(&String::from_utf8_lossy(&text))
                .map(|s| !matches!(s.state, 'Z' | 'X'))
                .unwrap_or(true)),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn exit_code(&self) -> Result<Option<i32>, TransportError> {
        match self.transport.read_file(&self.exit_file).await {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).trim().parse().ok()),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends `signal` (a name: TERM, KILL) to the process group and the cgroup's processes.
    async fn signal_tree(&self, signal: &str) -> Result<(), TransportError> {
        // The session leader's pid is also its process group id.
        let mut cmd = CommandSpec::new("sh", &["-c", SIGNAL, "sh", signal, &self.pid.to_string()]);
        cmd.args.push(self.cgroup.as_ref().map(|c| c.display().to_string()).unwrap_or_default());
        self.transport.exec(&cmd).await.map(|_| ())
    }
}

/// What the launcher said about the cgroup.
#[derive(Debug, PartialEq)]
enum CgroupStatus {
    /// None was asked for.
    None,
    Joined,
    NotCreated(String),
    NotJoined(String),
}

fn cgroup_status(s: &str) -> CgroupStatus {
    // The tools' messages name the path again (`mkdir: cannot create directory '…': Permission
    // denied`): the reason is what follows the last colon.
    let why = |w: &str| w.rsplit_once(": ").map_or(w, |(_, r)| r).trim().to_string();
    if s == "cg" {
        CgroupStatus::Joined
    } else if let Some(w) = s.strip_prefix("nocg create ") {
        CgroupStatus::NotCreated(why(w))
    } else if let Some(w) = s.strip_prefix("nocg join ") {
        CgroupStatus::NotJoined(why(w))
    } else {
        CgroupStatus::None
    }
}

fn rand_suffix() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// An exit code the wrapper recorded, read the way a shell reports it (128 + n = signal n).
fn exit_info(code: i32) -> ExitInfo {
    if code > 128 {
        ExitInfo { code: None, signal: Some(code - 128) }
    } else {
        ExitInfo { code: Some(code), signal: None }
    }
}

#[async_trait]
impl RunningProcess for SshProcess {
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
        if let Some(done) = *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(Some(done));
        }
        if let Some(code) = self.exit_code().await? {
            return Ok(Some(exit_info(code)));
        }
        // Gone without a recorded code: the wrapper itself was killed.
        if !self.alive().await? {
            return Ok(Some(ExitInfo { code: None, signal: None }));
        }
        Ok(None)
    }

    async fn stop(&self, grace: Duration) -> Result<ExitInfo, TransportError> {
        if let Some(done) = *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(done);
        }
        let mut info = self.exited().await?;
        if info.is_none() {
            self.signal_tree("TERM").await?;
            // Stopping is not the soak: checking a few times a second is fine here.
            let deadline = tokio::time::Instant::now() + grace;
            while tokio::time::Instant::now() < deadline && self.alive().await? {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let _ = self.signal_tree("KILL").await;
            info = Some(match self.exit_code().await? {
                Some(code) => exit_info(code),
                None => ExitInfo { code: None, signal: Some(15) },
            });
        } else {
            // The leader ended by itself; whatever it left behind goes too.
            let _ = self.signal_tree("KILL").await;
        }
        if let Some(cg) = &self.cgroup {
            // Whatever left the group dies with the cgroup, whose folder then goes.
            end_cgroup(&self.transport, cg).await?;
        }
        let info = info.unwrap_or(ExitInfo { code: None, signal: None });
        let _ = self.transport.exec(&CommandSpec::new("rm", &["-f", &self.exit_file.display().to_string()])).await;
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) = Some(info);
        Ok(info)
    }
}

impl Drop for SshProcess {
    fn drop(&mut self) {
        if self.stopped.lock().map(|s| s.is_some()).unwrap_or(true) {
            return;
        }
        // Dropped without a stop (a failed trial): end the tree in the background.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (t, group, cg) = (self.transport.clone(), format!("-{}", self.pid), self.cgroup.clone());
            rt.spawn(async move {
                let _ = t.exec(&CommandSpec::new("kill", &["-KILL", "--", &group])).await;
                if let Some(cg) = cg {
                    let _ = end_cgroup(&t, &cg).await;
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launchers_cgroup_report_is_read_with_the_reason_only() {
        assert_eq!(cgroup_status("cg"), CgroupStatus::Joined);
        assert_eq!(cgroup_status(""), CgroupStatus::None);
        assert_eq!(
            cgroup_status("nocg create mkdir: cannot create directory '/sys/fs/cgroup/x': Permission denied"),
            CgroupStatus::NotCreated("Permission denied".into())
        );
        assert_eq!(
            cgroup_status("nocg join sh: 1: cannot create /sys/fs/cgroup/x/cgroup.procs: Device or resource busy"),
            CgroupStatus::NotJoined("Device or resource busy".into())
        );
        assert_eq!(
            cgroup_status("nocg join not a cgroup v2 folder (no cgroup.procs)"),
            CgroupStatus::NotJoined("not a cgroup v2 folder (no cgroup.procs)".into())
        );
    }
}
