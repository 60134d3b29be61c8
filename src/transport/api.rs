//! The `Transport` trait: how the lab reaches a host's shell and files, local or remote.
//!
//! Every backend that runs tools (adb, uhubctl, a host build) goes through it, so a
//! device on another machine needs only another transport. Commands are argv
//! vectors, never shell strings: a config value can never become shell syntax.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;

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
}

impl TransportError {
    /// Whether waiting and reconnecting can help (a wrong key or login cannot).
    pub fn is_transient(&self) -> bool {
        matches!(self, TransportError::Unreachable { .. } | TransportError::Timeout { .. })
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
