//! The local transport: this machine, through tokio's process API (no shell).

use std::path::Path;

use async_trait::async_trait;
use tokio::process::Command;

use super::api::{CommandOutput, CommandSpec, RunningProcess, SpawnSpec, Staged, Transport, TransportError};
use super::forward::Forward;
use super::forward_target::ForwardTarget;
use super::local_process::LocalProcess;

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

    async fn exec(&self, cmd: &CommandSpec) -> Result<CommandOutput, TransportError> {
        let mut c = Command::new(&cmd.program);
        c.args(&cmd.args).envs(&cmd.env).kill_on_drop(true).stdin(std::process::Stdio::null());
        if let Some(dir) = &cmd.cwd {
            c.current_dir(dir);
        }
        let child = c.output();
        match tokio::time::timeout(cmd.timeout, child).await {
            Err(_) => {
                Err(TransportError::Timeout { host: self.host.clone(), command: cmd.display(), timeout: cmd.timeout })
            }
            Ok(Err(source)) => Err(TransportError::Spawn { host: self.host.clone(), command: cmd.display(), source }),
            Ok(Ok(out)) => Ok(CommandOutput { status: out.status.code(), stdout: out.stdout, stderr: out.stderr }),
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
