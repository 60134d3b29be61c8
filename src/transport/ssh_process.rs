//! A program started on an SSH host, detached from the connection.
//!
//! The program runs in a new session (`setsid`), so a dropped connection or a
//! restarted sshd does not hang it up: nothing about the soak depends on SSH. A small
//! wrapper shell waits for it and writes its exit code to a file, which is how the lab
//! learns how it ended. Config strings only ever travel as positional arguments of a
//! constant script, never inside it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::api::{CommandSpec, ExitInfo, RunningProcess, SpawnSpec, Transport, TransportError};
use super::ssh::SshTransport;

/// `sh -c LAUNCH sh OUT ERR EXIT PROGRAM ARGS…`: starts `PROGRAM ARGS…` in a new session
/// with its output in OUT and ERR, records its exit code in EXIT, prints the session's pid.
const LAUNCH: &str = r#"out=$1; err=$2; ex=$3; shift 3; rm -f "$ex"; setsid sh -c 'o=$1; e=$2; x=$3; shift 3; "$@" >"$o" 2>"$e" </dev/null; echo $? >"$x.tmp" && mv "$x.tmp" "$x"' sh "$out" "$err" "$ex" "$@" >/dev/null 2>&1 </dev/null & echo $!"#;

pub struct SshProcess {
    transport: SshTransport,
    pid: u32,
    exit_file: PathBuf,
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
        cmd.args.push(spec.cmd.program.clone());
        cmd.args.extend(spec.cmd.args.iter().cloned());
        cmd.env = spec.cmd.env.clone();
        cmd.cwd = spec.cmd.cwd.clone();
        cmd.timeout = Duration::from_secs(30);
        let out = transport.exec(&cmd).await?;
        let pid = out.stdout_text().trim().parse::<u32>().map_err(|_| TransportError::Spawn {
            host: host.clone(),
            command: spec.cmd.display(),
            source: std::io::Error::other(format!("no pid from the launcher: {}", out.stderr_text().trim())),
        })?;
        Ok(SshProcess { transport: transport.clone(), pid, exit_file, stopped: Mutex::new(None) })
    }

    async fn alive(&self) -> Result<bool, TransportError> {
        let pid = self.pid.to_string();
        Ok(self.transport.exec(&CommandSpec::new("kill", &["-0", &pid])).await?.success())
    }

    async fn exit_code(&self) -> Result<Option<i32>, TransportError> {
        match self.transport.read_file(&self.exit_file).await {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).trim().parse().ok()),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn signal_group(&self, signal: &str) -> Result<(), TransportError> {
        // The session leader's pid is also its process group id.
        let group = format!("-{}", self.pid);
        self.transport.exec(&CommandSpec::new("kill", &[signal, "--", &group])).await.map(|_| ())
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
        None
    }

    fn cgroup_note(&self) -> Option<&str> {
        Some("no cgroup on SSH hosts yet: the process group is measured and stopped")
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
            self.signal_group("-TERM").await?;
            // Stopping is not the soak: checking a few times a second is fine here.
            let deadline = tokio::time::Instant::now() + grace;
            while tokio::time::Instant::now() < deadline && self.alive().await? {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let _ = self.signal_group("-KILL").await;
            info = Some(match self.exit_code().await? {
                Some(code) => exit_info(code),
                None => ExitInfo { code: None, signal: Some(15) },
            });
        } else {
            // The leader ended by itself; whatever it left behind goes too.
            let _ = self.signal_group("-KILL").await;
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
            let (t, group) = (self.transport.clone(), format!("-{}", self.pid));
            rt.spawn(async move {
                let _ = t.exec(&CommandSpec::new("kill", &["-KILL", "--", &group])).await;
            });
        }
    }
}
