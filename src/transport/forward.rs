//! A port forward: a listener on 127.0.0.1 whose connections lead to a target on a host.
//!
//! The listener is served by one thread that sleeps in poll(2) until a connection or the
//! stop signal arrives (no wakeups while idle). Each accepted connection is handed to the
//! transport's relay. Dropping the [`Forward`] closes one end of a socket pair; the
//! acceptor and every relay watch the other end, so all of them wake and stop at once,
//! and the listening socket is closed before `drop` returns.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::watch;

use super::api::TransportError;
use super::forward_target::ForwardTarget;

/// A running port forward. Dropping it stops listening and closes every connection.
pub struct Forward {
    host: String,
    local_addr: SocketAddr,
    target: ForwardTarget,
    shared: Arc<Shared>,
    /// Closing it wakes the acceptor and every relay (they watch the other end).
    stop: Option<UnixStream>,
    acceptor: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Forward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forward")
            .field("host", &self.host)
            .field("local_addr", &self.local_addr)
            .field("target", &self.target)
            .finish()
    }
}

/// What the handle, the acceptor and the relays share.
#[derive(Debug)]
pub(super) struct Shared {
    accepted: AtomicU64,
    active: AtomicU64,
    /// Connections that failed on the host's side; receivers see every change.
    failed: watch::Sender<u64>,
    last_error: Mutex<Option<String>>,
}

impl Shared {
    /// Records why a connection failed (the library never prints: callers read it back).
    pub(super) fn fail(&self, why: impl std::fmt::Display) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.to_string());
        self.failed.send_modify(|n| *n += 1);
    }
}

/// One accepted connection, for the transport to relay. Counted as active until dropped.
pub(super) struct Accepted {
    /// The local client, in blocking mode.
    pub client: TcpStream,
    /// Becomes readable (end of file) when the forward is dropped.
    pub stop: UnixStream,
    pub shared: Arc<Shared>,
}

impl Drop for Accepted {
    fn drop(&mut self) {
        self.shared.active.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Forward {
    /// Listens on `127.0.0.1:local_port` and hands every connection to `serve`, which
    /// must return at once (it starts a thread or a task for the connection).
    pub(super) fn start(
        host: &str,
        target: &ForwardTarget,
        local_port: u16,
        serve: impl Fn(Accepted) + Send + 'static,
    ) -> Result<Forward, TransportError> {
        let addr = format!("127.0.0.1:{local_port}");
        let listen_err = |source| TransportError::Listen { host: host.into(), addr: addr.clone(), source };
        let listener = TcpListener::bind(("127.0.0.1", local_port)).map_err(listen_err)?;
        let local_addr = listener.local_addr().map_err(listen_err)?;
        // Accepting only after poll said so; non-blocking so a connection that vanished in
        // between cannot hang the acceptor.
        listener.set_nonblocking(true).map_err(listen_err)?;
        let (stop, stop_rx) = UnixStream::pair().map_err(listen_err)?;
        let shared = Arc::new(Shared {
            accepted: AtomicU64::new(0),
            active: AtomicU64::new(0),
            failed: watch::Sender::new(0),
            last_error: Mutex::new(None),
        });
        let s = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name(format!("lab-forward-{}", local_addr.port()))
            .spawn(move || accept_loop(&listener, &stop_rx, &s, serve))
            .map_err(listen_err)?;
        Ok(Forward {
            host: host.into(),
            local_addr,
            target: target.clone(),
            shared,
            stop: Some(stop),
            acceptor: Some(acceptor),
        })
    }

    /// Where it listens: `127.0.0.1:PORT`.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn target(&self) -> &ForwardTarget {
        &self.target
    }

    /// The host's name in `lab.toml`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.accepted.load(Ordering::Relaxed)
    }

    /// Connections open now.
    pub fn active(&self) -> u64 {
        self.shared.active.load(Ordering::Relaxed)
    }

    /// Connections closed because the host side failed: the target refused, forwarding is
    /// disabled on the host, the host could not be reached, or the SSH connection broke.
    pub fn failed(&self) -> u64 {
        *self.shared.failed.borrow()
    }

    /// Why the last failed connection failed, with the fix.
    pub fn last_error(&self) -> Option<String> {
        self.shared.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Changes whenever a connection fails (its value is [`Forward::failed`]), so a caller
    /// can report failures as they happen without polling.
    pub fn failures(&self) -> watch::Receiver<u64> {
        self.shared.failed.subscribe()
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        drop(self.stop.take());
        // The acceptor wakes at once and closes the listener: once this returns, the
        // port refuses connections.
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, stop: &UnixStream, shared: &Arc<Shared>, serve: impl Fn(Accepted)) {
    loop {
        let mut fds = [pollfd(listener, libc::POLLIN), pollfd(stop, libc::POLLIN)];
        if poll(&mut fds, None).is_err() || fds[1].revents != 0 {
            return;
        }
        loop {
            match listener.accept() {
                Ok((client, _)) => {
                    let Ok(stop) = stop.try_clone() else {
                        shared.fail("cannot watch the stop signal: out of file descriptors");
                        continue;
                    };
                    // Accepted sockets inherit non-blocking mode on some systems (macOS).
                    let _ = client.set_nonblocking(false);
                    shared.accepted.fetch_add(1, Ordering::Relaxed);
                    shared.active.fetch_add(1, Ordering::Relaxed);
                    serve(Accepted { client, stop, shared: shared.clone() });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => {}
                Err(e) => {
                    // Out of file descriptors and the like: the pending connection stays
                    // queued, so back off (waking early on stop) instead of spinning.
                    shared.fail(format!("cannot accept a connection: {e}"));
                    let mut fds = [pollfd(stop, libc::POLLIN)];
                    if poll(&mut fds, Some(Duration::from_millis(200))).is_err() || fds[0].revents != 0 {
                        return;
                    }
                    break;
                }
            }
        }
    }
}

/// A poll(2) entry for `fd`; with no events the slot is left out (poll skips negative fds),
/// so a hang-up nobody asked about cannot wake the caller over and over.
pub(super) fn pollfd(fd: &impl AsRawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd { fd: if events == 0 { -1 } else { fd.as_raw_fd() }, events, revents: 0 }
}

/// poll(2): waits until one of `fds` is ready or `timeout` passes (`None`: no timeout).
pub(super) fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ms = timeout.map_or(-1, |d| d.as_millis().min(i32::MAX as u128) as libc::c_int);
    loop {
        // SAFETY: `fds` is a valid, exclusively borrowed slice of pollfd for the whole call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
