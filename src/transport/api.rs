//! The `Transport` trait: how the lab reaches a host's shell and files, local or remote.
//!
//! Every backend that runs tools (adb, uhubctl, a host build) goes through it, so a
//! device on another machine needs only another transport. Commands are argv
//! vectors, never shell strings: a config value can never become shell syntax.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;

use super::forward::Forward;
use super::forward_target::ForwardTarget;

#[derive(Debug, Clone, PartialEq)]
pub struct CommandSpec {
    pub program: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
    pub timeout: Duration,
}

impl CommandSpec {
    pub fn new(program: &str, args: &[&str]) -> Self {
        CommandSpec {
            program: program.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: BTreeMap::new(),
            cwd: None,
            timeout: Duration::from_secs(60),
        }
    }

    /// The command as a person would type it, each argument quoted where needed (for messages).
    pub fn display(&self) -> String {
        std::iter::once(&self.program).chain(&self.args).map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ")
    }
}

/// POSIX single-quote quoting: `it's` → `'it'\''s'`. Used for display and for
/// transports that must hand a command line to a remote shell.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CommandOutput {
    /// Exit code; `None` when killed by a signal.
    pub status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.status == Some(0)
    }
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// A long-running program: started in its own process group (and in a cgroup v2 when
/// `cgroup` is given and can be made), with its output going to files.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnSpec {
    /// Program, arguments, extra environment and working folder (`timeout` is not used).
    pub cmd: CommandSpec,
    /// Files on the host for the program's standard output and error; `None` discards it.
    pub stdout: Option<PathBuf>,
    pub stderr: Option<PathBuf>,
    /// A cgroup v2 folder to create and start the program in, so that every process it
    /// starts is accounted and stopped together. When it cannot be made or joined the
    /// program runs in its process group only, and `RunningProcess::cgroup` says `None`.
    pub cgroup: Option<PathBuf>,
}

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    /// Exit code, when it exited by itself.
    pub code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit code {c}"),
            (None, Some(s)) => write!(f, "killed by signal {s}"),
            (None, None) => f.write_str("ended"),
        }
    }
}

/// A program started by [`Transport::spawn`]. Dropping the handle kills whatever is
/// left of its process tree.
#[async_trait]
pub trait RunningProcess: Send + Sync {
    /// The leader's pid on the host; also its process group id.
    fn pid(&self) -> u32;

    /// The cgroup the tree runs in, when one could be made.
    fn cgroup(&self) -> Option<&Path>;

    /// Why there is no cgroup (for the record), when there is none.
    fn cgroup_note(&self) -> Option<&str>;

    /// How the leader ended, if it has (does not wait).
    async fn exited(&self) -> Result<Option<ExitInfo>, TransportError>;

    /// Stops the whole tree: SIGTERM, up to `grace` for the leader to exit, then SIGKILL
    /// to whatever is left (the cgroup's `cgroup.kill`, else the process group). Removes
    /// the cgroup. Returns how the leader ended. Idempotent.
    async fn stop(&self, grace: Duration) -> Result<ExitInfo, TransportError>;
}

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("{host}: cannot start `{command}`: {source}; fix: install it or check PATH on that host")]
    Spawn { host: String, command: String, source: std::io::Error },
    #[error("{host}: `{command}` did not finish within {timeout:?}")]
    Timeout { host: String, command: String, timeout: Duration },
    #[error("{host}: copying {from} to {to}: {source}")]
    Copy { host: String, from: PathBuf, to: PathBuf, source: std::io::Error },
    #[error("{host} is unreachable: {detail}")]
    Unreachable { host: String, detail: String },
    #[error("{host}: host key check failed: {detail}")]
    HostKey { host: String, detail: String },
    #[error("{host}: login failed: {detail}")]
    Auth { host: String, detail: String },
    #[error("{host}: reading {path}: {source}")]
    Read { host: String, path: PathBuf, source: std::io::Error },
    #[error("{host}: {what}: {source}")]
    Process { host: String, what: String, source: std::io::Error },
    #[error("{host}: {what} is not supported on this kind of host yet")]
    Unsupported { host: String, what: String },
    #[error(
        "{host}: cannot listen on {addr} for a port forward: {source}; fix: choose another local port, \
         or 0 for any free one"
    )]
    Listen { host: String, addr: String, source: std::io::Error },
    #[error("{host}: forwarding to {target}: {detail}")]
    Forward { host: String, target: String, detail: String },
}

impl TransportError {
    /// Whether waiting and reconnecting can help (a wrong key or login cannot).
    pub fn is_transient(&self) -> bool {
        matches!(self, TransportError::Unreachable { .. } | TransportError::Timeout { .. })
    }

    /// The file or folder does not exist (a process that exited, a kernel without the feature).
    pub fn is_not_found(&self) -> bool {
        match self {
            TransportError::Read { source, .. } => {
                source.kind() == std::io::ErrorKind::NotFound || source.raw_os_error() == Some(3 /* ESRCH */)
            }
            _ => false,
        }
    }
}

/// A file made available on a host: where it is, its sha256, and whether it had to be copied.
#[derive(Debug, Clone, PartialEq)]
pub struct Staged {
    pub path: PathBuf,
    pub sha256: String,
    pub uploaded: bool,
}

#[async_trait]
pub trait Transport: Send + Sync {
    /// The host's name in `lab.toml`.
    fn host(&self) -> &str;

    async fn exec(&self, cmd: &CommandSpec) -> Result<CommandOutput, TransportError>;

    /// Copies a local file to `remote` on the host.
    async fn upload(&self, local: &Path, remote: &Path) -> Result<(), TransportError>;

    /// Copies `remote` on the host to a local file.
    async fn download(&self, remote: &Path, local: &Path) -> Result<(), TransportError>;

    /// Makes a local build file available on the host, content-addressed by sha256:
    /// copied once per host, skipped when already there.
    async fn stage(&self, local: &Path) -> Result<Staged, TransportError>;

    /// Whether the host answers now: one connection attempt (or one reuse of a kept
    /// session), nothing run. This machine always answers.
    async fn ping(&self) -> Result<(), TransportError> {
        Ok(())
    }

    /// Starts a long-running program (an app under test) and returns at once.
    async fn spawn(&self, _spec: &SpawnSpec) -> Result<Box<dyn RunningProcess>, TransportError> {
        Err(TransportError::Unsupported { host: self.host().into(), what: "running an app under test".into() })
    }

    /// Listens on `127.0.0.1:local_port` (0: any free port) and leads every connection
    /// accepted there to `target` on the host, until the returned handle is dropped.
    async fn forward(&self, _local_port: u16, _target: &ForwardTarget) -> Result<Forward, TransportError> {
        Err(TransportError::Unsupported { host: self.host().into(), what: "port forwarding".into() })
    }

    /// Reads a whole file on the host (kernel files under /proc and /sys included).
    /// By default through `cat`; a missing file is a `Read` error of kind NotFound.
    async fn read_file(&self, path: &Path) -> Result<Vec<u8>, TransportError> {
        let mut cmd = CommandSpec::new("cat", &["--"]);
        cmd.args.push(path.display().to_string());
        let out = self.exec(&cmd).await?;
        if out.success() {
            return Ok(out.stdout);
        }
        let kind = if out.stderr_text().contains("No such file") {
            std::io::ErrorKind::NotFound
        } else {
            std::io::ErrorKind::Other
        };
        Err(TransportError::Read {
            host: self.host().into(),
            path: path.into(),
            source: std::io::Error::new(kind, out.stderr_text().trim().to_string()),
        })
    }

    /// The names in a folder on the host, sorted. By default through `ls -1A`.
    async fn list_dir(&self, path: &Path) -> Result<Vec<String>, TransportError> {
        let mut cmd = CommandSpec::new("ls", &["-1A", "--"]);
        cmd.args.push(path.display().to_string());
        let out = self.exec(&cmd).await?;
        if !out.success() {
            return Err(TransportError::Read {
                host: self.host().into(),
                path: path.into(),
                source: std::io::Error::other(out.stderr_text().trim().to_string()),
            });
        }
        let mut names: Vec<String> = out.stdout_text().lines().map(str::to_string).collect();
        names.sort();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_arguments_literal() {
        assert_eq!(shell_quote("plain-arg_1.txt"), "plain-arg_1.txt");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$(rm -rf /); x"), "'$(rm -rf /); x'");
        assert_eq!(shell_quote(""), "''");
    }
}
