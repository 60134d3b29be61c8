//! Port forwarding on this machine: the forward still listens on its own 127.0.0.1 port
//! and proxies to the target (a TCP address or a Unix socket), so a caller gets the same
//! kind of address from every host and `--local-port` means the same everywhere.

use std::os::unix::net::UnixStream as StdUnixStream;

use tokio::io::{AsyncRead, AsyncWrite, copy_bidirectional};
use tokio::net::{TcpStream, UnixStream};

use super::api::TransportError;
use super::forward::Accepted;
use super::forward_target::ForwardTarget;

/// Relays one accepted connection as a task on `runtime`.
pub(super) fn serve(runtime: &tokio::runtime::Handle, host: &str, target: &ForwardTarget, conn: Accepted) {
    let (host, target) = (host.to_string(), target.clone());
    runtime.spawn(async move {
        let failed =
            |detail: String| TransportError::Forward { host: host.clone(), target: target.to_string(), detail };
        let client = match to_tokio(&conn) {
            Ok(v) => v,
            Err(e) => return conn.shared.fail(failed(format!("cannot relay: {e}"))),
        };
        let opened = match &target {
            ForwardTarget::Tcp { host, port } => pump(client, TcpStream::connect((host.as_str(), *port)).await).await,
            ForwardTarget::Unix(path) => pump(client, UnixStream::connect(path).await).await,
        };
        if let Err(e) = opened {
            conn.shared.fail(failed(format!("cannot connect: {e}; fix: check that it is listening on this machine")));
        }
    });
}

type Client = (TcpStream, UnixStream);

/// The client and the stop signal as tokio streams.
fn to_tokio(conn: &Accepted) -> std::io::Result<Client> {
    let client = conn.client.try_clone()?;
    client.set_nonblocking(true)?;
    let stop: StdUnixStream = conn.stop.try_clone()?;
    stop.set_nonblocking(true)?;
    Ok((TcpStream::from_std(client)?, UnixStream::from_std(stop)?))
}

/// Copies both ways (each end of file passed on as a shutdown) until both sides are done
/// or the forward is stopped. `Err` only when the target could not be reached.
async fn pump<S: AsyncRead + AsyncWrite + Unpin>(
    (mut client, stop): Client,
    target: std::io::Result<S>,
) -> std::io::Result<()> {
    let mut target = target?;
    tokio::select! {
        // A reset on either side just ends the connection, as it would without the forward.
        _ = copy_bidirectional(&mut client, &mut target) => {}
        _ = stop.readable() => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpStream};
    use std::os::unix::net::UnixListener;
    use std::time::Duration;

    use super::super::api::Transport;
    use super::super::local::LocalTransport;
    use super::*;

    /// Answers with the byte count and its own end of file, after the client's end of file.
    fn counting_server(path: &std::path::Path) {
        let l = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    (&c).read_to_end(&mut got).unwrap();
                    let sum: u64 = got.iter().map(|&b| b as u64).sum();
                    (&c).write_all(format!("{} {sum}", got.len()).as_bytes()).unwrap();
                });
            }
        });
    }

    /// Sends `data`, half-closes, returns the whole reply (blocking: run off the runtime).
    /// A connection closed early (a refused target) gives what arrived before, maybe nothing.
    fn exchange(addr: std::net::SocketAddr, data: Vec<u8>) -> String {
        let c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let _ = (&c).write_all(&data).and_then(|()| c.shutdown(Shutdown::Write));
        let mut reply = Vec::new();
        let _ = (&c).read_to_end(&mut reply);
        String::from_utf8(reply).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_unix_socket_is_reached_through_a_local_port_with_half_close() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("usbmuxd");
        counting_server(&sock);
        let t = LocalTransport::new("local");
        let fwd = t.forward(0, &ForwardTarget::Unix(sock)).await.unwrap();
        let addr = fwd.local_addr();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let want = format!("{} {}", data.len(), data.iter().map(|&b| b as u64).sum::<u64>());
        let got = tokio::task::spawn_blocking(move || exchange(addr, data)).await.unwrap();
        assert_eq!(got, want);
        assert_eq!((fwd.connections(), fwd.failed()), (1, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_missing_socket_is_reported_and_drop_stops_listening() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("later.sock");
        let t = LocalTransport::new("local");
        let fwd = t.forward(0, &ForwardTarget::Unix(sock.clone())).await.unwrap();
        let addr = fwd.local_addr();
        let mut failures = fwd.failures();
        let got = tokio::task::spawn_blocking(move || exchange(addr, b"x".to_vec())).await.unwrap();
        assert_eq!(got, "", "closed without a reply");
        tokio::time::timeout(Duration::from_secs(10), failures.changed()).await.unwrap().unwrap();
        assert_eq!(fwd.failed(), 1);
        let why = fwd.last_error().unwrap();
        assert!(why.starts_with(&format!("local: forwarding to unix:{}: cannot connect", sock.display())), "{why}");

        counting_server(&sock);
        let got = tokio::task::spawn_blocking(move || exchange(addr, b"abc".to_vec())).await.unwrap();
        assert_eq!(got, "3 294", "the same listener serves the next connection");
        drop(fwd);
        let e = TcpStream::connect(addr).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_port_in_use_is_a_listen_error_with_the_fix() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let t = LocalTransport::new("local");
        let e = t.forward(port, &ForwardTarget::Tcp { host: "127.0.0.1".into(), port: 9 }).await.unwrap_err();
        assert!(matches!(e, TransportError::Listen { .. }), "{e}");
        assert!(e.to_string().contains(&format!("cannot listen on 127.0.0.1:{port}")), "{e}");
        assert!(e.to_string().contains("fix: choose another local port"), "{e}");
    }
}
