//! The forward proxy's connections: requests in absolute form from the client are
//! rewritten to origin form and sent upstream; answers flow back untouched.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};

use super::dispatcher::Dispatcher;

/// Counters the stats-flush timer reports.
#[derive(Debug, Default)]
pub struct Stats {
    pub connections: u64,
    pub requests: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Client,
    Upstream,
}

struct Conn {
    client: TcpStream,
    upstream: Option<TcpStream>,
    /// Bytes from the client not yet parsed into a whole request.
    inbuf: Vec<u8>,
    /// Bytes waiting for the upstream / the client to accept them.
    to_upstream: Vec<u8>,
    to_client: Vec<u8>,
}

pub struct Proxy {
    conns: HashMap<usize, Conn>,
    by_fd: HashMap<RawFd, (usize, Side)>,
    next_id: usize,
    /// Resolved upstream addresses, by `host:port`; refreshed by the DNS timer.
    dns: HashMap<String, SocketAddr>,
    pub stats: Stats,
}

impl Proxy {
    pub fn new() -> Self {
        Proxy { conns: HashMap::new(), by_fd: HashMap::new(), next_id: 0, dns: HashMap::new(), stats: Stats::default() }
    }

    pub fn owns(&self, fd: RawFd) -> bool {
        self.by_fd.contains_key(&fd)
    }

    pub fn accept(&mut self, s: TcpStream, d: &mut dyn Dispatcher) -> io::Result<()> {
        s.set_nonblocking(true)?;
        s.set_nodelay(true)?;
        let id = self.next_id;
        self.next_id += 1;
        d.set(s.as_raw_fd(), false)?;
        self.by_fd.insert(s.as_raw_fd(), (id, Side::Client));
        self.conns.insert(
            id,
            Conn { client: s, upstream: None, inbuf: Vec::new(), to_upstream: Vec::new(), to_client: Vec::new() },
        );
        self.stats.connections += 1;
        Ok(())
    }

    /// Resolves every upstream again, as Envoy's DNS refresh timer does.
    pub fn refresh_dns(&mut self) {
        let names: Vec<String> = self.dns.keys().cloned().collect();
        for n in names {
            if let Some(addr) = n.to_socket_addrs().ok().and_then(|mut a| a.next()) {
                self.dns.insert(n, addr);
            }
        }
    }

    fn resolve(&mut self, authority: &str) -> io::Result<SocketAddr> {
        if let Some(a) = self.dns.get(authority) {
            return Ok(*a);
        }
        let addr = authority
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{authority} has no address")))?;
        self.dns.insert(authority.to_string(), addr);
        Ok(addr)
    }

    /// Handles readiness of one of the proxy's sockets (writability needs nothing
    /// special: whatever is pending is written after every event).
    pub fn ready(&mut self, fd: RawFd, readable: bool, d: &mut dyn Dispatcher) {
        let Some(&(id, side)) = self.by_fd.get(&fd) else { return };
        if let Err(e) = self.step(id, side, readable, d) {
            if e.kind() != io::ErrorKind::UnexpectedEof {
                eprintln!("relay: connection {id}: {e}");
            }
            self.close(id, d);
        }
    }

    fn step(&mut self, id: usize, side: Side, readable: bool, d: &mut dyn Dispatcher) -> io::Result<()> {
        let mut eof = false;
        if readable {
            let mut buf = [0u8; 16 * 1024];
            loop {
                let conn = self.conns.get_mut(&id).expect("registered");
                let stream = match side {
                    Side::Client => &mut conn.client,
                    Side::Upstream => conn.upstream.as_mut().expect("registered"),
                };
                match stream.read(&mut buf) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => match side {
                        Side::Client => conn.inbuf.extend_from_slice(&buf[..n]),
                        Side::Upstream => {
                            conn.to_client.extend_from_slice(&buf[..n]);
                            self.stats.bytes_down += n as u64;
                        }
                    },
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if side == Side::Client {
                self.parse_requests(id, d)?;
            }
        }
        // What arrived before an end of stream is still delivered.
        self.flush(id, d)?;
        if eof { Err(io::ErrorKind::UnexpectedEof.into()) } else { Ok(()) }
    }

    /// Moves every whole request from the client's buffer to the upstream's.
    fn parse_requests(&mut self, id: usize, d: &mut dyn Dispatcher) -> io::Result<()> {
        loop {
            let conn = self.conns.get_mut(&id).expect("registered");
            let Some(end) = conn.inbuf.windows(4).position(|w| w == b"\r\n\r\n") else { return Ok(()) };
            let head = String::from_utf8_lossy(&conn.inbuf[..end]).into_owned();
            let mut lines = head.split("\r\n");
            let request_line = lines.next().unwrap_or("");
            let mut parts = request_line.split(' ');
            let (method, target, version) =
                (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("not a proxy request: `{request_line}`"));
            let rest = target.strip_prefix("http://").ok_or_else(bad)?;
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, "/"),
            };
            let authority = if authority.contains(':') { authority.to_string() } else { format!("{authority}:80") };
            let mut length = 0usize;
            let mut out = format!("{method} {path} {version}\r\n");
            for h in lines {
                let name = h.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
                if name == "proxy-connection" {
                    continue;
                }
                if name == "content-length" {
                    length = h.split(':').nth(1).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
                }
                out.push_str(h);
                out.push_str("\r\n");
            }
            out.push_str("\r\n");
            if conn.inbuf.len() < end + 4 + length {
                return Ok(()); // the body is not all here yet
            }
            let body: Vec<u8> = conn.inbuf[end + 4..end + 4 + length].to_vec();
            conn.inbuf.drain(..end + 4 + length);
            conn.to_upstream.extend_from_slice(out.as_bytes());
            conn.to_upstream.extend_from_slice(&body);
            self.stats.requests += 1;
            self.stats.bytes_up += (out.len() + body.len()) as u64;
            if self.conns[&id].upstream.is_none() {
                let addr = self.resolve(&authority)?;
                // Loopback connects at once; a blocking connect keeps the example short.
                let up = TcpStream::connect(addr)?;
                up.set_nonblocking(true)?;
                up.set_nodelay(true)?;
                d.set(up.as_raw_fd(), false)?;
                self.by_fd.insert(up.as_raw_fd(), (id, Side::Upstream));
                self.conns.get_mut(&id).expect("registered").upstream = Some(up);
            }
        }
    }

    /// Writes what is pending each way; watches for writability only while something waits.
    fn flush(&mut self, id: usize, d: &mut dyn Dispatcher) -> io::Result<()> {
        let conn = self.conns.get_mut(&id).expect("registered");
        write_some(&mut conn.client, &mut conn.to_client)?;
        d.set(conn.client.as_raw_fd(), !conn.to_client.is_empty())?;
        if let Some(up) = conn.upstream.as_mut() {
            write_some(up, &mut conn.to_upstream)?;
            d.set(up.as_raw_fd(), !conn.to_upstream.is_empty())?;
        }
        Ok(())
    }

    fn close(&mut self, id: usize, d: &mut dyn Dispatcher) {
        if let Some(conn) = self.conns.remove(&id) {
            for fd in std::iter::once(conn.client.as_raw_fd()).chain(conn.upstream.as_ref().map(|u| u.as_raw_fd())) {
                d.remove(fd);
                self.by_fd.remove(&fd);
            }
        }
    }
}

fn write_some(s: &mut TcpStream, pending: &mut Vec<u8>) -> io::Result<()> {
    while !pending.is_empty() {
        match s.write(pending) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                pending.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
