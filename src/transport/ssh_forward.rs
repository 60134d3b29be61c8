//! Port forwarding over SSH: every accepted connection gets its own session (host key
//! verified and login done exactly as for commands, by `connect_with_backoff`) and a
//! direct-tcpip or direct-streamlocal channel, relayed on a thread of its own. The exec
//! session pool is not used: forwards live long and must not starve commands.
//!
//! The relay runs libssh2 in non-blocking mode and sleeps in poll(2) on the client socket,
//! the session's socket (in the directions libssh2 says it is blocked on) and the stop
//! signal, with the keepalive interval as timeout. One libssh2 rule shapes it: a call that
//! returned EAGAIN with a packet half sent must be repeated before any other call that
//! sends, or libssh2 finishes the half-sent packet in the other call's place and reports
//! the other call's packet as sent. So a send blocked that way is remembered and retried
//! alone. `keepalive_send` cannot be retried (it hides EAGAIN and waits an interval before
//! sending again), so a keepalive goes out only after a whole idle interval, when the
//! socket is empty, and one that still does not go out whole ends the connection.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use ssh2::{BlockDirections, Channel, ExtendedData, Session};

use super::api::TransportError;
use super::forward::{Accepted, poll, pollfd};
use super::forward_target::ForwardTarget;
use super::ssh::{SshConfig, connect_with_backoff};

/// Bytes read from one side before they are written to the other.
const CHUNK: usize = 64 * 1024;

/// Starts relaying one accepted connection on its own thread.
pub(super) fn serve(cfg: &Arc<SshConfig>, target: &ForwardTarget, conn: Accepted) {
    let (cfg, target, shared) = (cfg.clone(), target.clone(), conn.shared.clone());
    let spawned = std::thread::Builder::new().name("lab-forward-ssh".into()).spawn(move || run(&cfg, &target, conn));
    if let Err(e) = spawned {
        shared.fail(format!("cannot start a thread for a forwarded connection: {e}"));
    }
}

fn run(cfg: &SshConfig, target: &ForwardTarget, conn: Accepted) {
    let (session, mut channel) = match open(cfg, target) {
        Ok(v) => v,
        // Dropping `conn` closes the client's connection.
        Err(e) => return conn.shared.fail(e),
    };
    match relay(&session, &mut channel, &conn.client, &conn.stop, cfg.ssh.keepalive) {
        Ok(End::Done) => {
            // Both sides sent end of file: close politely, so the host drains its side.
            session.set_blocking(true);
            session.set_timeout(5_000);
            let _ = channel.close();
            let _ = channel.wait_close();
            let _ = session.disconnect(None, "port forward closed", None);
        }
        // Dropping the session closes its TCP connection; the host closes the target's.
        Ok(End::Stopped | End::ClientGone) => {}
        Err(e) => conn.shared.fail(TransportError::Forward {
            host: cfg.host.clone(),
            target: target.to_string(),
            detail: format!("the SSH connection broke: {e}"),
        }),
    }
}

/// A verified, logged-in session and a channel to the target.
fn open(cfg: &SshConfig, target: &ForwardTarget) -> Result<(Session, Channel), TransportError> {
    let session = connect_with_backoff(cfg)?;
    let refused = |e: ssh2::Error, option: &str| TransportError::Forward {
        host: cfg.host.clone(),
        target: target.to_string(),
        detail: format!(
            "the host refused to open it: {e}; fix: check that it is listening on the host, and that the \
             host's sshd allows it ({option} in sshd_config)"
        ),
    };
    let mut channel = match target {
        ForwardTarget::Tcp { host, port } => {
            session.channel_direct_tcpip(host, *port, None).map_err(|e| refused(e, "AllowTcpForwarding"))?
        }
        ForwardTarget::Unix(path) => {
            let p = path.to_str().ok_or_else(|| TransportError::Forward {
                host: cfg.host.clone(),
                target: target.to_string(),
                detail: "the socket path is not UTF-8; fix: use a path SSH can name".into(),
            })?;
            session.channel_direct_streamlocal(p, None).map_err(|e| refused(e, "AllowStreamLocalForwarding"))?
        }
    };
    // A forward has no stderr; merging keeps any stray extended data from piling up unread.
    let _ = channel.handle_extended_data(ExtendedData::Merge);
    Ok((session, channel))
}

/// How a relay ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// Both directions finished with end of file.
    Done,
    /// The forward was dropped.
    Stopped,
    /// The local client reset or vanished.
    ClientGone,
}

/// The libssh2 calls that send packets (reading sends window adjustments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    Eof,
    Read,
}

/// How the SSH side of a relay failed.
#[derive(Debug, thiserror::Error)]
enum RelayError {
    /// libssh2's error on `op`, all lower case as one clause of the forward's message.
    #[error("{}", format!("{op:?}: {source}").to_lowercase())]
    Ssh { op: Op, source: io::Error },
    #[error("poll: {0}")]
    Poll(io::Error),
    #[error("keepalive: {0}")]
    Keepalive(ssh2::Error),
    #[error("the host has read nothing for {keepalive:?}")]
    Silent { keepalive: Duration },
}

/// Bytes read from one side and not yet all written to the other.
struct Chunk {
    bytes: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Chunk {
    fn new() -> Self {
        Chunk { bytes: vec![0; CHUNK].into_boxed_slice(), start: 0, end: 0 }
    }
    fn is_empty(&self) -> bool {
        self.start == self.end
    }
    fn unsent(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }
    fn sent(&mut self, n: usize) {
        self.start += n;
    }
    /// Room to read into; only called when empty.
    fn room(&mut self) -> &mut [u8] {
        (self.start, self.end) = (0, 0);
        &mut self.bytes
    }
    fn filled(&mut self, n: usize) {
        self.end = n;
    }
}

pub(super) fn would_block(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted)
}

/// Whether libssh2 holds a packet it could not send whole (it set "blocked outbound").
pub(super) fn half_sent(session: &Session) -> bool {
    matches!(session.block_directions(), BlockDirections::Outbound | BlockDirections::Both)
}

/// Moves bytes both ways until both sides have sent end of file, the client goes away or
/// the forward is stopped. `Err` is an SSH-side failure.
fn relay(
    session: &Session,
    ch: &mut Channel,
    mut client: &TcpStream,
    stop: &UnixStream,
    keepalive: Duration,
) -> Result<End, RelayError> {
    // A zero interval would make poll spin.
    let keepalive = keepalive.max(Duration::from_secs(1));
    session.set_blocking(false);
    if client.set_nonblocking(true).is_err() {
        return Ok(End::ClientGone);
    }
    let mut up = Chunk::new(); // client → host
    let mut down = Chunk::new(); // host → client
    let (mut client_eof, mut eof_sent, mut host_eof, mut client_shut) = (false, false, false, false);
    // A send that returned EAGAIN with its packet half out: the only libssh2 call allowed next.
    let mut blocked: Option<Op> = None;
    loop {
        if eof_sent && client_shut {
            return Ok(End::Done);
        }
        let mut progress = false;
        let mut client_events = 0;
        let mut ssh_events = 0;

        // The client side: plain socket calls, independent of libssh2's state.
        if up.is_empty() && !client_eof {
            match client.read(up.room()) {
                Ok(0) => client_eof = true,
                Ok(n) => up.filled(n),
                Err(e) if would_block(&e) => client_events |= libc::POLLIN,
                Err(_) => return Ok(End::ClientGone),
            }
            progress |= (client_events & libc::POLLIN) == 0;
        }
        if !down.is_empty() {
            match client.write(down.unsent()) {
                Ok(n) => {
                    down.sent(n);
                    progress = true;
                }
                Err(e) if would_block(&e) => client_events |= libc::POLLOUT,
                Err(_) => return Ok(End::ClientGone),
            }
        }
        if host_eof && down.is_empty() && !client_shut {
            let _ = client.shutdown(Shutdown::Write);
            client_shut = true;
            progress = true;
        }

        // The host side, in a fixed order; after a half-sent packet only its own call.
        for op in [Op::Write, Op::Eof, Op::Read] {
            if blocked.is_some_and(|b| b != op) {
                continue;
            }
            // Ok(true): bytes or an end of file moved.
            let result: io::Result<bool> = match op {
                Op::Write if !up.is_empty() => ch.write(up.unsent()).map(|n| {
                    up.sent(n);
                    n > 0
                }),
                Op::Eof if client_eof && up.is_empty() && !eof_sent => {
                    ch.send_eof().map_err(io::Error::from).map(|()| {
                        eof_sent = true;
                        true
                    })
                }
                Op::Read if down.is_empty() && !host_eof => match ch.read(down.room()) {
                    Ok(0) if ch.eof() => {
                        host_eof = true;
                        Ok(true)
                    }
                    // Nothing yet (libssh2 may return 0 while it exchanges keys): wait for the socket.
                    Ok(0) => {
                        ssh_events |= libc::POLLIN;
                        Ok(false)
                    }
                    Ok(n) => {
                        down.filled(n);
                        Ok(true)
                    }
                    Err(e) => Err(e),
                },
                _ => continue,
            };
            match result {
                Ok(moved) => {
                    progress |= moved || blocked.is_some();
                    blocked = None;
                }
                Err(e) if would_block(&e) => {
                    if half_sent(session) {
                        // Only the socket's room can unblock it; its stale "inbound" bit must
                        // not make a readable socket wake us while nothing reads it.
                        ssh_events = libc::POLLOUT;
                        blocked = Some(op);
                        break;
                    }
                    // Waiting for data or a window adjustment.
                    ssh_events |= libc::POLLIN;
                }
                Err(source) => return Err(RelayError::Ssh { op, source }),
            }
        }
        if progress {
            continue;
        }
        // libssh2 reads every packet that arrives whichever call it is in: a window
        // adjustment taken in by a read, or data taken in by a write, wakes no socket.
        if blocked.is_none() {
            let can_write = !up.is_empty() && ch.write_window().remaining > 0;
            let can_read = down.is_empty() && !host_eof && (ch.read_window().available > 0 || ch.eof());
            if can_write || can_read {
                continue;
            }
        }
        let mut fds = [pollfd(client, client_events), pollfd(session, ssh_events), pollfd(stop, libc::POLLIN)];
        let ready = poll(&mut fds, Some(keepalive)).map_err(RelayError::Poll)?;
        if fds[2].revents != 0 {
            return Ok(End::Stopped);
        }
        if ready == 0 && blocked.is_none() {
            // Idle for a whole interval: keep the connection (and any NAT on the way) alive.
            session.keepalive_send().map_err(RelayError::Keepalive)?;
            if half_sent(session) {
                return Err(RelayError::Silent { keepalive });
            }
        }
    }
}
