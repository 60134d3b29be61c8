//! `com.apple.internal.devicecompute.CoreDeviceProxy` (iOS 17+, over lockdown): the CDTunnel
//! handshake, then raw IPv6 packets both ways on the same stream, with the phone's TCP
//! (tcp.rs) listening on the RSD port and on each RSD service's port.
//!
//! The handshake follows pymobiledevice3 (`remote/tunnel_service.py`: `CDTunnelPacket` is the
//! magic `CDTunnel` and a big-endian u16 length before a JSON body) and the
//! `serverHandshakeResponse` its `misc/RemoteXPC.md` shows: `clientParameters {address, mtu,
//! netmask}`, `serverAddress`, `serverRSDPort`, `type`. The addresses are a unique-local /64 of
//! the phone's own (derived from its UDID), the phone `::1`, the host `::2`, as in that capture.

use std::io::{self, Read, Write};
use std::net::Ipv6Addr;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::Server;
use crate::tcp::{Link, Segment, Stack, Stream};

pub const SERVICE: &str = "com.apple.internal.devicecompute.CoreDeviceProxy";
const MAGIC: &[u8] = b"CDTunnel";
/// The tunnel's MTU (what the host asks for; the crate and pymobiledevice3 ask 16000).
pub const MTU: u16 = 16000;
/// RSD's port inside the tunnel, and the CoreDevice services' (the ports of the capture in
/// pymobiledevice3's `misc/RemoteXPC.md`).
pub const RSD_PORT: u16 = 56307;
pub const APP_SERVICE_PORT: u16 = 50056;
pub const DIAGNOSTICS_PORT: u16 = 50063;
pub const DTSERVICEHUB_PORT: u16 = 49664;
pub const PCAPD_SHIM_PORT: u16 = 49614;

/// The phone's and the host's tunnel addresses.
pub fn addresses(udid: &str) -> (Ipv6Addr, Ipv6Addr) {
    let h = Sha256::digest(format!("tunnel {udid}"));
    let word = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
    // fd00::/8 with a 40-bit global ID (RFC 4193), subnet 0.
    let prefix = [0xfd00 | u16::from(h[0]), word(1), word(3)];
    let at = |last| Ipv6Addr::new(prefix[0], prefix[1], prefix[2], 0, 0, 0, 0, last);
    (at(1), at(2))
}

fn read_handshake(s: &mut UnixStream) -> io::Result<Option<serde_json::Value>> {
    let mut magic = [0u8; 8];
    if !crate::wire::read_exact_or_eof(s, &mut magic)? {
        return Ok(None);
    }
    if magic != MAGIC {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("CDTunnel magic {magic:?}")));
    }
    let mut len = [0u8; 2];
    s.read_exact(&mut len)?;
    let mut body = vec![0; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut body)?;
    serde_json::from_slice(&body).map(Some).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

pub fn serve(mut s: UnixStream, server: &Arc<Server>, udid: &str) -> io::Result<()> {
    let Some(request) = read_handshake(&mut s)? else { return Ok(()) };
    let kind = request.get("type").and_then(|t| t.as_str()).unwrap_or_default().to_string();
    server.store.journal(
        udid,
        "coredeviceproxy",
        "handshake",
        serde_json::json!({"type": kind, "mtu": request.get("mtu")}),
    );
    if kind != "clientHandshakeRequest" {
        return Ok(()); // not the tunnel's handshake: the phone hangs up
    }
    let (phone_ip, host_ip) = addresses(udid);
    let response = serde_json::json!({
        "clientParameters": {"address": host_ip.to_string(), "mtu": MTU, "netmask": "ffff:ffff:ffff:ffff::"},
        "serverAddress": phone_ip.to_string(),
        "serverRSDPort": RSD_PORT,
        "type": "serverHandshakeResponse",
    });
    let body = serde_json::to_vec(&response)?;
    let mut frame = MAGIC.to_vec();
    frame.extend_from_slice(&(body.len() as u16).to_be_bytes());
    frame.extend_from_slice(&body);
    s.write_all(&frame)?;
    s.flush()?;

    let link = Arc::new(Link::new(s.try_clone()?, phone_ip, host_ip));
    let seed = u32::from_be_bytes(
        Sha256::digest(format!("{udid} {:?}", std::time::SystemTime::now()))[..4].try_into().unwrap(),
    );
    // RSD listens always; each service's port only while the phone runs it (listen_now).
    let mut stack = Stack::new(Arc::clone(&link), vec![RSD_PORT], seed);
    let ended = packets(&mut s, &mut stack, server, udid, host_ip);
    // The host closed the tunnel (or it broke): every connection in it ends.
    stack.shut();
    match ended {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof || e.kind() == io::ErrorKind::ConnectionReset => Ok(()),
        other => other,
    }
}

fn packets(s: &mut UnixStream, stack: &mut Stack, server: &Arc<Server>, udid: &str, host: Ipv6Addr) -> io::Result<()> {
    loop {
        let mut header = [0u8; 40];
        if !crate::wire::read_exact_or_eof(s, &mut header)? {
            return Ok(());
        }
        let len = usize::from(u16::from_be_bytes([header[4], header[5]]));
        let mut packet = header.to_vec();
        packet.resize(40 + len, 0);
        s.read_exact(&mut packet[40..])?;
        let segment = match Segment::parse(&packet) {
            Ok(seg) if seg.src == host => seg,
            Ok(seg) => {
                drop_packet(server, udid, &format!("from {}, not the host's address", seg.src));
                continue;
            }
            Err(e) => {
                // A bad checksum or not TCP: dropped, as a phone's stack drops it.
                drop_packet(server, udid, &e.to_string());
                continue;
            }
        };
        if segment.flags & (crate::tcp::SYN | crate::tcp::ACK) == crate::tcp::SYN {
            listen_now(stack, server, udid, segment.dst_port)?;
        }
        if let Some(conn) = stack.handle(&segment)? {
            let port = conn.local_port();
            server.store.journal(udid, "tunnel", "connect", serde_json::json!({"port": port}));
            let (server, udid) = (Arc::clone(server), udid.to_string());
            std::thread::spawn(move || {
                let stream = Stream::new(conn);
                let served = match port {
                    RSD_PORT => crate::rsd::serve(stream, &server, &udid),
                    APP_SERVICE_PORT => crate::coredevice::serve_app_service(stream, &server, &udid),
                    DIAGNOSTICS_PORT => crate::diagnostics::serve(stream, &server, &udid),
                    DTSERVICEHUB_PORT => crate::dvt::serve(stream, &server, &udid),
                    _ => crate::shim::serve_pcapd(stream, &server, &udid),
                };
                if let Err(e) = served
                    && !matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe)
                {
                    eprintln!("iphone: tunnel port {port}: {e}");
                }
            });
        }
    }
}

/// A SYN to a service's port finds a listener only while the phone runs the service (the
/// developer image mounted, for most): else the host gets a reset, as from a port with none.
fn listen_now(stack: &mut Stack, server: &Server, udid: &str, port: u16) -> io::Result<()> {
    let Some((_, name)) = crate::rsd::PORTS.iter().find(|(p, _)| *p == port) else { return Ok(()) };
    let runs = server.store.phone(udid)?.is_some_and(|p| crate::rsd::runs(&p, name));
    stack.listen(port, runs);
    Ok(())
}

fn drop_packet(server: &Server, udid: &str, why: &str) {
    server.store.journal(udid, "tunnel", "drop", serde_json::json!({"why": why}));
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_phone_has_its_own_unique_local_prefix() {
        let (phone, host) = super::addresses("00008110-AA");
        assert_eq!(phone.segments()[0] >> 8, 0xfd);
        assert_eq!((phone.segments()[7], host.segments()[7]), (1, 2));
        assert_eq!(phone.segments()[..4], host.segments()[..4]);
        assert_ne!(super::addresses("other").0, phone);
    }
}
