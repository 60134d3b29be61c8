//! The local transport: this machine, through tokio's process API (no shell).

use std::path::Path;

use async_trait::async_trait;
use tokio::process::Command;

use super::api::{CommandOutput, CommandSpec, RunningProcess, SpawnSpec, Staged, Transport, TransportError};
use super::forward::Forward;
use super::forward_target::ForwardTarget;
use super::local_process::LocalProcess;

/// Kills a command's process group unless it finished (disarmed by taking the pid).
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

#[derive(Debug, Clone)]
pub struct LocalTransport {
    host: String,
}

impl LocalTransport {
    pub fn new(host: &str) -> Self {
        LocalTransport { host: host.into() }
    }
}

#[async_trait]
impl Transport for LocalTransport {
    fn host(&self) -> &str {
        &self.host
    }

    /// Runs the command in its own process group: a timeout, or a caller that stops
    /// waiting (Ctrl-C), kills the whole group, so nothing it started lingers (a tool
    /// that hangs in a child, as adb can).
    async fn exec(&self, cmd: &CommandSpec) -> Result<CommandOutput, TransportError> {
        use std::process::Stdio;
        let mut c = Command::new(&cmd.program);
        c.args(&cmd.args)
            .envs(&cmd.env)
            .kill_on_drop(true)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = &cmd.cwd {
            c.current_dir(dir);
        }
        let spawn_err = |source| TransportError::Spawn { host: self.host.clone(), command: cmd.display(), source };
        let child = c.spawn().map_err(spawn_err)?;
        let mut group = GroupGuard(child.id());
        match tokio::time::timeout(cmd.timeout, child.wait_with_output()).await {
            Err(_) => {
                Err(TransportError::Timeout { host: self.host.clone(), command: cmd.display(), timeout: cmd.timeout })
            }
            Ok(Err(source)) => Err(spawn_err(source)),
            Ok(Ok(out)) => {
                group.0 = None;
                Ok(CommandOutput { status: out.status.code(), stdout: out.stdout, stderr: out.stderr })
            }
        }
    }

    async fn upload(&self, local: &Path, remote: &Path) -> Result<(), TransportError> {
        copy(&self.host, local, remote).await
    }

    async fn download(&self, remote: &Path, local: &Path) -> Result<(), TransportError> {
        copy(&self.host, remote, local).await
    }

    /// On this machine a build is already where it is: nothing to copy.
    async fn stage(&self, local: &Path) -> Result<Staged, TransportError> {
        let bytes = tokio::fs::read(local).await.map_err(|source| TransportError::Copy {
            host: self.host.clone(),
            from: local.into(),
            to: local.into(),
            source,
        })?;
        Ok(Staged { path: local.to_path_buf(), sha256: crate::seed::sha256_hex(&bytes), uploaded: false })
    }

    async fn spawn(&self, spec: &SpawnSpec) -> Result<Box<dyn RunningProcess>, TransportError> {
        Ok(Box::new(LocalProcess::spawn(&self.host, spec).await?))
    }

    /// A proxy on its own port for both kinds of target (see `local_forward`).
    async fn forward(&self, local_port: u16, target: &ForwardTarget) -> Result<Forward, TransportError> {
        let (runtime, host, t) = (tokio::runtime::Handle::current(), self.host.clone(), target.clone());
        Forward::start(&self.host, target, local_port, move |conn| {
            super::local_forward::serve(&runtime, &host, &t, conn)
        })
    }

    async fn read_file(&self, path: &Path) -> Result<Vec<u8>, TransportError> {
        tokio::fs::read(path).await.map_err(|source| TransportError::Read {
            host: self.host.clone(),
            path: path.into(),
            source,
        })
    }

    async fn list_dir(&self, path: &Path) -> Result<Vec<String>, TransportError> {
        let err = |source| TransportError::Read { host: self.host.clone(), path: path.into(), source };
        let mut rd = tokio::fs::read_dir(path).await.map_err(err)?;
        let mut names = Vec::new();
        while let Some(e) = rd.next_entry().await.map_err(err)? {
            names.push(e.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
}

async fn copy(host: &str, from: &Path, to: &Path) -> Result<(), TransportError> {
    let err = |source| TransportError::Copy { host: host.into(), from: from.into(), to: to.into(), source };
    if let Some(dir) = to.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(err)?;
    }
    tokio::fs::copy(from, to).await.map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn arguments_reach_the_program_literally() {
        let t = LocalTransport::new("local");
        let nasty = ["a b", "it's", "; echo pwned", "$(id)", "line1\nline2"];
        let mut cmd = CommandSpec::new("printf", &["%s\\0"]);
        cmd.args.extend(nasty.iter().map(|s| s.to_string()));
        let out = t.exec(&cmd).await.unwrap();
        assert!(out.success());
        let got: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().split('\0').filter(|s| !s.is_empty()).collect();
        assert_eq!(got, nasty);
    }

    /// Whether `pid` still runs (a zombie does not).
    fn running(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
    }

    #[tokio::test]
    async fn a_timeout_kills_what_the_command_started_too() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let mut cmd = CommandSpec::new("sh", &["-c", &script]);
        cmd.timeout = Duration::from_millis(500);
        let t = LocalTransport::new("local");
        assert!(matches!(t.exec(&cmd).await, Err(TransportError::Timeout { .. })));
        let pid: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while running(pid) {
            assert!(std::time::Instant::now() < deadline, "the command's child {pid} outlived its timeout");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[tokio::test]
    async fn missing_program_is_a_spawn_error_and_slow_one_times_out() {
        let t = LocalTransport::new("local");
        let e = t.exec(&CommandSpec::new("/nonexistent/lab-tool", &[])).await.unwrap_err();
        assert!(matches!(e, TransportError::Spawn { .. }), "{e}");
        let mut slow = CommandSpec::new("sleep", &["5"]);
        slow.timeout = Duration::from_millis(100);
        let e = t.exec(&slow).await.unwrap_err();
        assert!(matches!(e, TransportError::Timeout { .. }), "{e}");
    }

    #[tokio::test]
    async fn upload_and_download_copy_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        std::fs::write(&a, b"hello").unwrap();
        let t = LocalTransport::new("local");
        let b = dir.path().join("sub/b.txt");
        t.upload(&a, &b).await.unwrap();
        let c = dir.path().join("c.txt");
        t.download(&b, &c).await.unwrap();
        assert_eq!(std::fs::read(&c).unwrap(), b"hello");
    }
}
