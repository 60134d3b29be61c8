//! `ScriptedTransport`: a host that answers commands from a script.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use crate::transport::{CommandOutput, CommandSpec, Staged, Transport, TransportError};

/// What the host answers to one command.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// How long the command takes (tokio time, so paused-time tests skip it).
    pub delay: Duration,
    /// The host drops off while running it (`TransportError::Unreachable`).
    pub disconnect: bool,
}

impl Reply {
    /// Exit 0 with `stdout`.
    pub fn ok(stdout: &str) -> Reply {
        Reply {
            status: Some(0),
            stdout: stdout.as_bytes().to_vec(),
            stderr: Vec::new(),
            delay: Duration::ZERO,
            disconnect: false,
        }
    }

    /// Exit `status` with `stderr`.
    pub fn fail(status: i32, stderr: &str) -> Reply {
        Reply { status: Some(status), stderr: stderr.as_bytes().to_vec(), ..Reply::ok("") }
    }

    /// The connection is lost mid-command.
    pub fn disconnected() -> Reply {
        Reply { disconnect: true, ..Reply::ok("") }
    }

    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

struct Rule {
    prefix: Vec<String>,
    /// Used in order; the last one answers every later call.
    replies: VecDeque<Reply>,
}

/// A host whose commands answer from rules matched on an argv prefix (program first),
/// first rule first. A command no rule matches exits 127, as a missing program would.
/// Every call is recorded: commands as their argv, copies as `["<upload>", from, to]`
/// and `["<download>", from, to]`.
pub struct ScriptedTransport {
    host: String,
    rules: Mutex<Vec<Rule>>,
    calls: Mutex<Vec<Vec<String>>>,
    unreachable: AtomicBool,
}

impl ScriptedTransport {
    pub fn new(host: &str) -> Self {
        ScriptedTransport {
            host: host.into(),
            rules: Mutex::new(Vec::new()),
            calls: Mutex::new(Vec::new()),
            unreachable: AtomicBool::new(false),
        }
    }

    /// Commands starting with `prefix` answer `replies` in turn, then the last one again.
    pub fn on(&self, prefix: &[&str], replies: Vec<Reply>) -> &Self {
        assert!(!replies.is_empty(), "a rule needs at least one reply");
        lock(&self.rules)
            .push(Rule { prefix: prefix.iter().map(|s| s.to_string()).collect(), replies: replies.into() });
        self
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        lock(&self.calls).clone()
    }

    /// The calls whose program is `program`, as their arguments joined by spaces.
    pub fn calls_of(&self, program: &str) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| c.first().map(String::as_str) == Some(program))
            .map(|c| c[1..].join(" "))
            .collect()
    }

    /// From now on the host does not answer at all (or answers again).
    pub fn set_unreachable(&self, down: bool) {
        self.unreachable.store(down, Ordering::SeqCst);
    }

    fn record(&self, call: Vec<String>) -> Result<(), TransportError> {
        lock(&self.calls).push(call);
        self.check_reachable()
    }

    fn check_reachable(&self) -> Result<(), TransportError> {
        if self.unreachable.load(Ordering::SeqCst) {
            return Err(self.lost());
        }
        Ok(())
    }

    fn lost(&self) -> TransportError {
        TransportError::Unreachable { host: self.host.clone(), detail: "scripted: the host is down".into() }
    }

    fn reply_for(&self, argv: &[String]) -> Option<Reply> {
        let mut rules = lock(&self.rules);
        let rule = rules.iter_mut().find(|r| argv.starts_with(&r.prefix))?;
        if rule.replies.len() > 1 { rule.replies.pop_front() } else { rule.replies.front().cloned() }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[async_trait]
impl Transport for ScriptedTransport {
    fn host(&self) -> &str {
        &self.host
    }

    async fn exec(&self, cmd: &CommandSpec) -> Result<CommandOutput, TransportError> {
        let argv: Vec<String> = std::iter::once(cmd.program.clone()).chain(cmd.args.iter().cloned()).collect();
        self.record(argv.clone())?;
        let Some(reply) = self.reply_for(&argv) else {
            return Ok(CommandOutput {
                status: Some(127),
                stdout: Vec::new(),
                stderr: format!("scripted transport: no reply for `{}`", cmd.display()).into_bytes(),
            });
        };
        if reply.delay > cmd.timeout {
            tokio::time::sleep(cmd.timeout).await;
            return Err(TransportError::Timeout {
                host: self.host.clone(),
                command: cmd.display(),
                timeout: cmd.timeout,
            });
        }
        tokio::time::sleep(reply.delay).await;
        if reply.disconnect {
            return Err(self.lost());
        }
        Ok(CommandOutput { status: reply.status, stdout: reply.stdout, stderr: reply.stderr })
    }

    async fn upload(&self, local: &Path, remote: &Path) -> Result<(), TransportError> {
        self.record(vec!["<upload>".into(), local.display().to_string(), remote.display().to_string()])
    }

    async fn download(&self, remote: &Path, local: &Path) -> Result<(), TransportError> {
        self.record(vec!["<download>".into(), remote.display().to_string(), local.display().to_string()])
    }

    async fn stage(&self, local: &Path) -> Result<Staged, TransportError> {
        self.record(vec!["<stage>".into(), local.display().to_string()])?;
        let bytes = std::fs::read(local).map_err(|source| TransportError::Read {
            host: self.host.clone(),
            path: local.to_path_buf(),
            source,
        })?;
        let sha256 = crate::seed::sha256_hex(&bytes);
        Ok(Staged { path: Path::new("cache").join(&sha256), sha256, uploaded: true })
    }

    async fn ping(&self) -> Result<(), TransportError> {
        self.check_reachable()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn replies_follow_the_script_and_every_call_is_recorded() {
        let t = ScriptedTransport::new("shelf-1");
        t.on(&["uhubctl", "-l", "1-1"], vec![Reply::fail(1, "no hub"), Reply::ok("done")]);
        let cmd = CommandSpec::new("uhubctl", &["-l", "1-1", "-a", "off"]);
        assert_eq!(t.exec(&cmd).await.unwrap().status, Some(1));
        assert_eq!(t.exec(&cmd).await.unwrap().stdout_text(), "done");
        assert_eq!(t.exec(&cmd).await.unwrap().stdout_text(), "done", "the last reply repeats");
        let other = t.exec(&CommandSpec::new("adb", &["devices"])).await.unwrap();
        assert_eq!(other.status, Some(127));
        assert_eq!(t.calls_of("uhubctl").len(), 3);
        t.set_unreachable(true);
        assert!(matches!(t.exec(&cmd).await, Err(TransportError::Unreachable { .. })));
        assert!(t.ping().await.is_err());
        assert_eq!(t.calls().len(), 5, "a call to a host that is down is still recorded");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_command_times_out_and_a_dropped_one_is_unreachable() {
        let t = ScriptedTransport::new("h");
        t.on(&["slow"], vec![Reply::ok("").after(Duration::from_secs(120))]);
        t.on(&["drop"], vec![Reply::disconnected()]);
        let mut slow = CommandSpec::new("slow", &[]);
        slow.timeout = Duration::from_secs(30);
        assert!(matches!(t.exec(&slow).await, Err(TransportError::Timeout { .. })));
        assert!(matches!(t.exec(&CommandSpec::new("drop", &[])).await, Err(TransportError::Unreachable { .. })));
    }
}
