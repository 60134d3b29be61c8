//! Reading a remote command's stdout and stderr together, as they come.
//!
//! Reading one stream to its end before the other stalls: libssh2 counts the channel's
//! receive window as used only by what the caller reads, so stderr left unread fills the
//! window the server sees, the server stops sending, and the stdout read waits for data
//! that never comes (a command writing more stderr than the 2 MiB window before its
//! stdout ended only at its timeout). So both streams are read in turn, libssh2 in
//! non-blocking mode, sleeping in poll(2) on the session socket until the deadline.
//! The libssh2 rule of `ssh_forward` holds here too: a read that returned EAGAIN with a
//! window adjustment half sent is repeated before any other call.

use std::io::Read;
use std::time::Instant;

use ssh2::{Channel, Session};

use super::forward::{poll, pollfd};
use super::ssh_forward::{half_sent, would_block};

/// Bytes asked for per read (libssh2's largest packet payload).
const CHUNK: usize = 32 * 1024;

/// Why the streams could not be read to their end.
#[derive(Debug)]
pub(super) enum OutputError {
    /// The deadline passed first.
    Timeout,
    /// The session failed (the text says how).
    Broken(String),
}

/// Makes the session blocking again when dropped: sessions are pooled, and every other
/// operation expects blocking calls. Declared after the channel, it runs before the
/// channel is freed (a free in non-blocking mode can give up half done).
pub(super) struct NonBlocking<'a>(&'a Session);

impl<'a> NonBlocking<'a> {
    pub(super) fn new(session: &'a Session) -> Self {
        session.set_blocking(false);
        NonBlocking(session)
    }
}

impl Drop for NonBlocking<'_> {
    fn drop(&mut self) {
        self.0.set_blocking(true);
    }
}

/// Reads stdout and stderr of `ch` until the remote side sent end of file and nothing is
/// left unread, or `deadline` passes. The session must be in non-blocking mode.
pub(super) fn read_both(
    session: &Session,
    ch: &mut Channel,
    deadline: Instant,
) -> Result<(Vec<u8>, Vec<u8>), OutputError> {
    let mut out = [Vec::new(), Vec::new()]; // stdout, stderr: stream ids 0 and 1
    let mut chunk = vec![0u8; CHUNK];
    // The stream whose read left a packet half sent: the only call allowed next.
    let mut blocked: Option<i32> = None;
    loop {
        // libssh2's end of file waits until no data of either stream is left queued.
        if blocked.is_none() && ch.eof() {
            let [stdout, stderr] = out;
            return Ok((stdout, stderr));
        }
        let mut progress = false;
        let mut events = 0;
        for id in [0, 1] {
            if blocked.is_some_and(|b| b != id) {
                continue;
            }
            match ch.stream(id).read(&mut chunk) {
                Ok(n) => {
                    out[id as usize].extend_from_slice(&chunk[..n]);
                    // The half-sent packet went out: that is progress too.
                    progress |= n > 0 || blocked.is_some();
                    blocked = None;
                    // Nothing yet (libssh2 may return 0 while it exchanges keys): wait for the socket.
                    if n == 0 {
                        events |= libc::POLLIN;
                    }
                }
                Err(e) if would_block(&e) => {
                    if half_sent(session) {
                        // Only room in the socket unblocks it.
                        events = libc::POLLOUT;
                        blocked = Some(id);
                        break;
                    }
                    events |= libc::POLLIN;
                }
                Err(e) => return Err(OutputError::Broken(format!("reading {}: {e}", stream_name(id)))),
            }
        }
        if progress {
            continue;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(OutputError::Timeout);
        }
        // A read takes in every packet that arrived, for either stream: data already queued
        // wakes no socket.
        if blocked.is_none() && (ch.read_window().available > 0 || ch.eof()) {
            continue;
        }
        let mut fds = [pollfd(session, events)];
        if poll(&mut fds, Some(left)).map_err(|e| OutputError::Broken(format!("poll: {e}")))? == 0 {
            return Err(OutputError::Timeout);
        }
    }
}

fn stream_name(id: i32) -> &'static str {
    if id == 0 { "stdout" } else { "stderr" }
}
