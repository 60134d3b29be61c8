//! The SSH transport: a lab host reached with `ssh2` (libssh2).
//!
//! libssh2 is blocking, so every operation runs on tokio's blocking pool and never on
//! the async threads. One session per host is kept open and reused; a session that
//! fails is dropped and the next operation reconnects, with backoff. Host keys are
//! checked against a known_hosts file, strictly by default: an unknown or changed key
//! stops everything before a single command runs.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine;
use ssh2::{CheckResult, HashType, KnownHostFileKind, Session};

use crate::config::SshHost;

use super::api::{
    CommandOutput, CommandSpec, RunningProcess, SpawnSpec, Staged, Transport, TransportError, shell_quote,
};
use super::forward::Forward;
use super::forward_target::ForwardTarget;
use super::ssh_output::{NonBlocking, OutputError, read_both};

/// How to reach one lab host over SSH: the `[[host]]`'s settings as lab.toml gives them
/// (`config::SshHost`, held, not copied field by field), with the host's name and how
/// often to try.
#[derive(Debug, Clone, PartialEq)]
pub struct SshConfig {
    /// The host's name in `lab.toml`.
    pub host: String,
    pub ssh: SshHost,
    /// Connection attempts before the host counts as unreachable (backoff doubles from 0.5 s).
    pub connect_attempts: u32,
}

impl SshConfig {
    /// The transport settings of a `[[host]]` with an address.
    pub fn from_host(name: &str, h: &SshHost) -> Self {
        SshConfig { host: name.into(), ssh: h.clone(), connect_attempts: 4 }
    }

    /// (host, port) from `address`.
    pub fn host_port(&self) -> (String, u16) {
        match self.ssh.address.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') || h.starts_with('[') => {
                (h.trim_matches(|c| c == '[' || c == ']').to_string(), p.parse().unwrap_or(22))
            }
            _ => (self.ssh.address.clone(), 22),
        }
    }

    /// How known_hosts names this host: `host`, or `[host]:port` off port 22.
    pub fn known_hosts_name(&self) -> String {
        let (h, p) = self.host_port();
        if p == 22 { h } else { format!("[{h}]:{p}") }
    }
}

#[derive(Clone)]
pub struct SshTransport {
    cfg: SshConfig,
    /// Idle sessions, reused; at most `max_sessions` are in use at once.
    pool: Arc<Mutex<Vec<Session>>>,
    permits: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for SshTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshTransport").field("cfg", &self.cfg).finish()
    }
}

/// What went wrong reaching a host, with the fix.
fn unreachable(cfg: &SshConfig, detail: impl std::fmt::Display) -> TransportError {
    TransportError::Unreachable {
        host: cfg.host.clone(),
        detail: format!("{} ({}): {detail}", cfg.ssh.address, cfg.ssh.user),
    }
}

/// `SHA256:...` as `ssh-keygen -l` prints it.
fn fingerprint(session: &Session) -> String {
    match session.host_key_hash(HashType::Sha256) {
        Some(h) => format!("SHA256:{}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(h)),
        None => "unknown".into(),
    }
}

/// The known_hosts lines (1-based) that name `name` in plain text (hashed entries cannot be told apart).
fn entries_for(file: &Path, name: &str) -> Vec<usize> {
    let Ok(text) = std::fs::read_to_string(file) else { return Vec::new() };
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.split_whitespace().next().is_some_and(|hosts| hosts.split(',').any(|h| h == name)))
        .map(|(i, _)| i + 1)
        .collect()
}

/// Opens, verifies and authenticates a session. Blocking.
pub fn connect(cfg: &SshConfig) -> Result<Session, TransportError> {
    let (host, port) = cfg.host_port();
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| unreachable(cfg, format!("cannot resolve: {e}")))?
        .next()
        .ok_or_else(|| unreachable(cfg, "no address"))?;
    let tcp = TcpStream::connect_timeout(&addr, cfg.ssh.connect_timeout)
        .map_err(|e| unreachable(cfg, format!("cannot connect within {:?}: {e}", cfg.ssh.connect_timeout)))?;
    // Every command is a few small request/reply packets: without TCP_NODELAY, Nagle's
    // algorithm meets the peer's delayed ACK and each exchange waits ~40 ms.
    let _ = tcp.set_nodelay(true);
    let mut session = Session::new().map_err(|e| unreachable(cfg, e))?;
    session.set_tcp_stream(tcp);
    session.set_timeout(cfg.ssh.connect_timeout.as_millis().min(u32::MAX as u128) as u32);
    session.handshake().map_err(|e| unreachable(cfg, format!("SSH handshake failed: {e}")))?;
    verify_host_key(cfg, &session)?;
    match &cfg.ssh.identity {
        Some(key) => session.userauth_pubkey_file(&cfg.ssh.user, None, key, None),
        None => session.userauth_agent(&cfg.ssh.user),
    }
    .map_err(|e| TransportError::Auth {
        host: cfg.host.clone(),
        detail: format!(
            "{}@{}: {e}; fix: {}",
            cfg.ssh.user,
            cfg.ssh.address,
            match &cfg.ssh.identity {
                Some(k) => format!(
                    "add the public key of {} to ~{}/.ssh/authorized_keys on the host",
                    k.display(),
                    cfg.ssh.user
                ),
                None => "start ssh-agent and `ssh-add` a key the host accepts, or set `identity`".into(),
            }
        ),
    })?;
    if !session.authenticated() {
        return Err(TransportError::Auth { host: cfg.host.clone(), detail: "not authenticated".into() });
    }
    session.set_keepalive(true, cfg.ssh.keepalive.as_secs().clamp(1, u32::MAX as u64) as u32);
    Ok(session)
}

fn verify_host_key(cfg: &SshConfig, session: &Session) -> Result<(), TransportError> {
    let (host, port) = cfg.host_port();
    let (key, _) = session.host_key().ok_or_else(|| unreachable(cfg, "the server sent no host key"))?;
    let mut known = session.known_hosts().map_err(|e| unreachable(cfg, e))?;
    let file = &cfg.ssh.known_hosts;
    if file.exists() {
        known.read_file(file, KnownHostFileKind::OpenSSH).map_err(|e| TransportError::HostKey {
            host: cfg.host.clone(),
            detail: format!("cannot read known_hosts {}: {e}", file.display()),
        })?;
    }
    let name = cfg.known_hosts_name();
    match known.check_port(&host, port, key) {
        CheckResult::Match => Ok(()),
        CheckResult::Mismatch => {
            let lines = entries_for(file, &name);
            let at = match lines.as_slice() {
                [] => file.display().to_string(),
                ls => ls.iter().map(|l| format!("{}:{l}", file.display())).collect::<Vec<_>>().join(", "),
            };
            Err(TransportError::HostKey {
                host: cfg.host.clone(),
                detail: format!(
                    "HOST KEY CHANGED for {name}: the server offers {} but the entry at {at} says otherwise; \
                     nothing was run. fix: if the host was really reinstalled, remove that entry \
                     (`ssh-keygen -R '{name}' -f {}`) and add the new key after checking its fingerprint",
                    fingerprint(session),
                    file.display()
                ),
            })
        }
        CheckResult::NotFound if !cfg.ssh.strict_host_key_checking => Ok(()),
        CheckResult::NotFound => Err(TransportError::HostKey {
            host: cfg.host.clone(),
            detail: format!(
                "unknown host key for {name} ({}): no entry in {}; nothing was run. fix: check the fingerprint \
                 on the host, then `ssh-keyscan -p {port} {host} >> {}`",
                fingerprint(session),
                file.display(),
                file.display()
            ),
        }),
        CheckResult::Failure => Err(TransportError::HostKey {
            host: cfg.host.clone(),
            detail: "libssh2 could not check the host key".into(),
        }),
    }
}

/// The remote command line for `cmd`: every piece shell-quoted, so no config string
/// can become shell syntax on the host.
pub fn command_line(cmd: &CommandSpec) -> String {
    let mut parts = Vec::new();
    if let Some(dir) = &cmd.cwd {
        parts.push(format!("cd -- {} &&", shell_quote(&dir.display().to_string())));
    }
    parts.push("exec".into());
    if !cmd.env.is_empty() {
        parts.push("env".into());
        parts.extend(cmd.env.iter().map(|(k, v)| shell_quote(&format!("{k}={v}"))));
    }
    parts.push(shell_quote(&cmd.program));
    parts.extend(cmd.args.iter().map(|a| shell_quote(a)));
    parts.join(" ")
}

impl SshTransport {
    pub fn new(cfg: SshConfig) -> Self {
        let permits = Arc::new(tokio::sync::Semaphore::new(cfg.ssh.max_sessions.max(1) as usize));
        SshTransport { cfg, pool: Arc::new(Mutex::new(Vec::new())), permits }
    }

    pub fn config(&self) -> &SshConfig {
        &self.cfg
    }

    /// Runs `f` with a live session on the blocking pool. Connecting retries with
    /// backoff before the host counts as unreachable. A kept session can be dead
    /// without knowing it (the server restarted): when `f` fails with `Fail::Retry`
    /// — before anything ran on the host — it gets one fresh session and one more go.
    async fn with_session<T: Send + 'static>(
        &self,
        f: impl Fn(&Session, &SshConfig) -> Result<T, Fail> + Send + 'static,
    ) -> Result<T, TransportError> {
        let cfg = self.cfg.clone();
        let pool = self.pool.clone();
        let permit = self.permits.clone().acquire_owned().await.map_err(|e| unreachable(&cfg, e))?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let take = || pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let mut session = take();
            for round in 0..2 {
                let fresh = session.is_none();
                let s = match session.take() {
                    Some(s) => s,
                    None => connect_with_backoff(&cfg)?,
                };
                match f(&s, &cfg) {
                    Ok(v) => {
                        pool.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                        return Ok(v);
                    }
                    // The session is dropped: the next go gets a fresh one.
                    Err(Fail::Retry(e)) if fresh || round == 1 => return Err(e),
                    Err(Fail::Retry(_)) => {}
                    Err(Fail::Fatal(e)) => {
                        if !e.is_transient() {
                            pool.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                        }
                        return Err(e);
                    }
                }
            }
            Err(unreachable(&cfg, "no session"))
        })
        .await
        .map_err(|e| unreachable(&self.cfg, format!("SSH worker failed: {e}")))?
    }

    /// Connects (or reuses the session) and runs nothing: reachability, host key, login.
    pub async fn check(&self) -> Result<(), TransportError> {
        self.with_session(|s, cfg| {
            // A kept session may be dead: a round trip tells.
            s.keepalive_send().map(|_| ()).map_err(|e| Fail::Retry(io_err(cfg, "keepalive", e)))
        })
        .await
    }
}

/// Whether the host still answers on `s`: it opens a channel within a few seconds.
fn answers(s: &Session, cfg: &SshConfig) -> bool {
    s.set_timeout(cfg.ssh.connect_timeout.min(Duration::from_secs(5)).as_millis().max(1) as u32);
    s.channel_session().is_ok()
}

/// Shuts the socket of a session that is done for (its error is transient, so it is dropped,
/// not pooled): freeing a channel waits for the host's close, which sshd sends only once the
/// command exits, so a timed-out command would hold the worker for another timeout or two.
fn abandon(s: &Session) {
    // shutdown(2) leaves the descriptor open (the session still owns and closes it), so
    // nothing else is affected; a socket already gone is nothing to shut.
    let _ = nix::sys::socket::shutdown(s.as_raw_fd(), nix::sys::socket::Shutdown::Both);
}

fn io_err(cfg: &SshConfig, what: &str, e: impl std::fmt::Display) -> TransportError {
    unreachable(cfg, format!("{what}: {e}"))
}

/// How an operation on a session failed.
enum Fail {
    /// Before anything happened on the host (opening a channel or SFTP): safe to redo.
    Retry(TransportError),
    /// After the host may have acted on it: never redone.
    Fatal(TransportError),
}

impl From<TransportError> for Fail {
    fn from(e: TransportError) -> Self {
        Fail::Fatal(e)
    }
}

pub(super) fn connect_with_backoff(cfg: &SshConfig) -> Result<Session, TransportError> {
    let mut delay = Duration::from_millis(500);
    let mut last = None;
    for attempt in 0..cfg.connect_attempts.max(1) {
        if attempt > 0 {
            std::thread::sleep(delay);
            delay *= 2;
        }
        match connect(cfg) {
            Ok(s) => return Ok(s),
            // A key or login problem does not get better by retrying.
            Err(e @ (TransportError::HostKey { .. } | TransportError::Auth { .. })) => return Err(e),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| unreachable(cfg, "no connection attempt made")))
}

fn sftp(s: &Session, cfg: &SshConfig) -> Result<ssh2::Sftp, Fail> {
    s.sftp().map_err(|e| Fail::Retry(io_err(cfg, "starting SFTP", e)))
}

fn sftp_mkdir_p(sftp: &ssh2::Sftp, dir: &Path) {
    let mut cur = PathBuf::new();
    for c in dir.components() {
        cur.push(c);
        // Already there is fine; a real failure shows up when the file is created.
        let _ = sftp.mkdir(&cur, 0o755);
    }
}

#[async_trait]
impl Transport for SshTransport {
    fn host(&self) -> &str {
        &self.cfg.host
    }

    async fn exec(&self, cmd: &CommandSpec) -> Result<CommandOutput, TransportError> {
        let cmd = cmd.clone();
        self.with_session(move |s, cfg| -> Result<CommandOutput, Fail> {
            let line = command_line(&cmd);
            s.set_timeout(cmd.timeout.as_millis().min(u32::MAX as u128) as u32);
            let timed_out =
                || TransportError::Timeout { host: cfg.host.clone(), command: cmd.display(), timeout: cmd.timeout };
            let timeout = |e: ssh2::Error| {
                if e.code() == ssh2::ErrorCode::Session(-9) { timed_out() } else { io_err(cfg, "running a command", e) }
            };
            let deadline = Instant::now() + cmd.timeout;
            let mut ch = s.channel_session().map_err(|e| Fail::Retry(timeout(e)))?;
            ch.exec(&line).map_err(timeout)?;
            let read = {
                let _nb = NonBlocking::new(s);
                read_both(s, &mut ch, deadline)
            };
            let read = read.map_err(|e| match e {
                // A slow command, or a host gone silent (the lost-host path): a new channel tells.
                OutputError::Timeout if answers(s, cfg) => timed_out(),
                OutputError::Timeout => io_err(
                    cfg,
                    "running a command",
                    format!("no answer from the host within {:?} (`{}`)", cmd.timeout, cmd.display()),
                ),
                OutputError::Broken(what) => io_err(cfg, "running a command", what),
            });
            if read.is_err() {
                abandon(s);
            }
            let (stdout, stderr) = read?;
            // The command ended its output in time; its exit status and the close follow at once
            // (a second at least, so an end of file just before the deadline is not a timeout).
            let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(1));
            s.set_timeout(left.as_millis().min(u32::MAX as u128) as u32);
            ch.wait_close().map_err(timeout)?;
            let status = ch.exit_status().map_err(timeout)?;
            let signal = ch.exit_signal().ok().and_then(|s| s.exit_signal);
            Ok(CommandOutput { status: if signal.is_some() { None } else { Some(status) }, stdout, stderr })
        })
        .await
    }

    async fn upload(&self, local: &Path, remote: &Path) -> Result<(), TransportError> {
        let (local, remote) = (local.to_path_buf(), remote.to_path_buf());
        self.with_session(move |s, cfg| {
            let copy_err = |e: std::io::Error| TransportError::Copy {
                host: cfg.host.clone(),
                from: local.clone(),
                to: remote.clone(),
                source: e,
            };
            let bytes = std::fs::read(&local).map_err(copy_err)?;
            let sftp = sftp(s, cfg)?;
            if let Some(dir) = remote.parent() {
                sftp_mkdir_p(&sftp, dir);
            }
            // Write beside, then rename: a broken connection never leaves half a file in place.
            let tmp = remote.with_extension("lab-partial");
            // Keep the file's mode: an uploaded program must stay executable.
            let mode = {
                use std::os::unix::fs::PermissionsExt;
                std::fs::metadata(&local).map(|m| m.permissions().mode() & 0o777).unwrap_or(0o644)
            };
            let flags = ssh2::OpenFlags::WRITE | ssh2::OpenFlags::CREATE | ssh2::OpenFlags::TRUNCATE;
            let mut f =
                sftp.open_mode(&tmp, flags, mode as i32, ssh2::OpenType::File).map_err(|e| copy_err(e.into()))?;
            f.write_all(&bytes).map_err(copy_err)?;
            drop(f);
            let _ = sftp.unlink(&remote);
            sftp.rename(&tmp, &remote, None).map_err(|e| copy_err(e.into()))?;
            Ok(())
        })
        .await
    }

    async fn download(&self, remote: &Path, local: &Path) -> Result<(), TransportError> {
        let (local, remote) = (local.to_path_buf(), remote.to_path_buf());
        self.with_session(move |s, cfg| {
            let copy_err = |e: std::io::Error| TransportError::Copy {
                host: cfg.host.clone(),
                from: remote.clone(),
                to: local.clone(),
                source: e,
            };
            let sftp = sftp(s, cfg)?;
            let mut f = sftp.open(&remote).map_err(|e| copy_err(e.into()))?;
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes).map_err(copy_err)?;
            if let Some(dir) = local.parent() {
                std::fs::create_dir_all(dir).map_err(copy_err)?;
            }
            let tmp = local.with_extension("lab-partial");
            std::fs::write(&tmp, &bytes).map_err(copy_err)?;
            std::fs::rename(&tmp, &local).map_err(copy_err)?;
            Ok(())
        })
        .await
    }

    async fn stage(&self, local: &Path) -> Result<Staged, TransportError> {
        let bytes = tokio::fs::read(local).await.map_err(|source| TransportError::Copy {
            host: self.cfg.host.clone(),
            from: local.to_path_buf(),
            to: PathBuf::from(&self.cfg.ssh.cache_dir),
            source,
        })?;
        let sha = crate::seed::sha256_hex(&bytes);
        let name = local.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "build".into());
        let remote = PathBuf::from(&self.cfg.ssh.cache_dir).join(&sha).join(name);
        let (r, size) = (remote.clone(), bytes.len() as u64);
        let present = self
            .with_session(move |s, cfg| {
                let sftp = sftp(s, cfg)?;
                Ok(sftp.stat(&r).ok().and_then(|st| st.size) == Some(size))
            })
            .await?;
        if !present {
            self.upload(local, &remote).await?;
        }
        Ok(Staged { path: remote, sha256: sha, uploaded: !present })
    }

    async fn spawn(&self, spec: &SpawnSpec) -> Result<Box<dyn RunningProcess>, TransportError> {
        Ok(Box::new(super::ssh_process::SshProcess::spawn(self, spec).await?))
    }

    async fn ping(&self) -> Result<(), TransportError> {
        self.check().await
    }

    /// Each connection gets its own session and channel (see `ssh_forward`). One session
    /// is opened first, so an unreachable host, an untrusted key or a refused login fails
    /// here, before anything listens.
    async fn forward(&self, local_port: u16, target: &ForwardTarget) -> Result<Forward, TransportError> {
        let cfg = self.cfg.clone();
        tokio::task::spawn_blocking(move || {
            connect_with_backoff(&cfg).map(|s| {
                let _ = s.disconnect(None, "checked before forwarding", None);
            })
        })
        .await
        .map_err(|e| unreachable(&self.cfg, format!("SSH worker failed: {e}")))??;
        let (cfg, t) = (Arc::new(self.cfg.clone()), target.clone());
        Forward::start(&self.cfg.host, target, local_port, move |conn| super::ssh_forward::serve(&cfg, &t, conn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn cfg(address: &str) -> SshConfig {
        SshConfig {
            host: "h".into(),
            ssh: SshHost {
                address: address.into(),
                user: "u".into(),
                identity: None,
                known_hosts: "/dev/null".into(),
                strict_host_key_checking: true,
                connect_timeout: Duration::from_secs(1),
                keepalive: Duration::from_secs(30),
                cache_dir: ".cache/lab/builds".into(),
                max_sessions: 2,
            },
            connect_attempts: 1,
        }
    }

    #[test]
    fn addresses_and_known_hosts_names() {
        assert_eq!(cfg("lab1").host_port(), ("lab1".to_string(), 22));
        assert_eq!(cfg("lab1:2222").host_port(), ("lab1".to_string(), 2222));
        assert_eq!(cfg("[::1]:2222").host_port(), ("::1".to_string(), 2222));
        assert_eq!(cfg("lab1").known_hosts_name(), "lab1");
        assert_eq!(cfg("127.0.0.1:2222").known_hosts_name(), "[127.0.0.1]:2222");
    }

    #[test]
    fn command_lines_quote_every_piece() {
        let mut c = CommandSpec::new("./app", &["a b", "it's", "$(id); rm -rf /", "x\ny"]);
        c.env = BTreeMap::from([("K".to_string(), "v w".to_string())]);
        c.cwd = Some("/opt/my builds".into());
        assert_eq!(
            command_line(&c),
            "cd -- '/opt/my builds' && exec env 'K=v w' ./app 'a b' 'it'\\''s' '$(id); rm -rf /' 'x\ny'"
        );
    }

    #[test]
    fn unreachable_host_fails_fast_with_the_address() {
        // Port 9 on loopback: nothing listens, the connection is refused at once.
        let Err(e) = connect(&cfg("127.0.0.1:9")) else { panic!("connected to a closed port") };
        assert!(matches!(e, TransportError::Unreachable { .. }), "{e}");
        assert!(e.to_string().contains("127.0.0.1:9"), "{e}");
    }
}
