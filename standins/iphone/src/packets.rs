//! The bytes of what pcapd shows: an Ethernet frame (en0 is Ethernet to the tap) holding
//! IPv4 and TCP with correct lengths and checksums, each behind pcapd's packet header.
//!
//! The header (95 bytes, big-endian except the two pids): header_length u32,
//! header_version u8, packet_length u32, interface_type u8, unit u16, io u8,
//! protocol_family u32, frame_pre_length u32, frame_post_length u32, interface_name [16],
//! pid u32 LE, comm [17], svc u32, epid u32 LE, ecomm [17], seconds u32, microseconds
//! u32; the frame starts at header_length. Written from pymobiledevice3's
//! services/pcapd.py (`device_packet_struct`) and go-ios's ios/pcap/pcap.go
//! (`IOSPacketHeader`, 95 bytes), which agree but for svc's byte order (0 here, the same
//! either way); the idevice crate's `DevicePacket::from_vec` reads it (tests below).

use std::net::SocketAddrV4;
use std::time::{SystemTime, UNIX_EPOCH};

pub const HEADER_LEN: u32 = 95;
const HEADER_VERSION: u8 = 2;
/// IFT_ETHER: Wi-Fi's en0 is an Ethernet interface to BSD.
const IFT_ETHER: u8 = 6;
const AF_INET: u32 = 2;
const ETHERNET_LEN: usize = 14;
/// Locally administered MACs of the stand-in's own: the phone's and its router's.
const PHONE_MAC: [u8; 6] = [0x02, 0x1a, 0xb0, 0x00, 0x00, 0x01];
const ROUTER_MAC: [u8; 6] = [0x02, 0x1a, 0xb0, 0x00, 0x00, 0xfe];
/// Response bytes per TCP segment (a 1500-byte MTU less IPv4, TCP and timestamp options).
pub const MSS: usize = 1448;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;

/// Which way a packet went, as the header's `io` byte. No source documents the byte's
/// values; these are the stand-in's choice (0 in, 1 out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    In = 0,
    Out = 1,
}

/// One TCP segment of a conversation between the app and a server.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub direction: Direction,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub payload: Vec<u8>,
}

/// The Internet checksum of `parts` concatenated.
fn checksum(parts: &[&[u8]]) -> u16 {
    let bytes: Vec<u8> = parts.concat();
    let mut sum: u32 = bytes.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Segment {
    /// IPv4 (20 bytes, no options) + TCP (20 bytes, no options) + the payload.
    pub fn ipv4(&self, id: u16) -> Vec<u8> {
        let (src, dst) = (self.src.ip().octets(), self.dst.ip().octets());
        let tcp_len = 20 + self.payload.len();
        let mut tcp = Vec::with_capacity(tcp_len);
        tcp.extend_from_slice(&self.src.port().to_be_bytes());
        tcp.extend_from_slice(&self.dst.port().to_be_bytes());
        tcp.extend_from_slice(&self.seq.to_be_bytes());
        tcp.extend_from_slice(&self.ack.to_be_bytes());
        tcp.extend_from_slice(&[5 << 4, self.flags]);
        tcp.extend_from_slice(&65535u16.to_be_bytes()); // window
        tcp.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
        tcp.extend_from_slice(&self.payload);
        let pseudo = [&src[..], &dst[..], &[0, 6], &(tcp_len as u16).to_be_bytes()].concat();
        let sum = checksum(&[&pseudo, &tcp]);
        tcp[16..18].copy_from_slice(&sum.to_be_bytes());

        let mut ip = Vec::with_capacity(20 + tcp_len);
        ip.extend_from_slice(&[0x45, 0]);
        ip.extend_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
        ip.extend_from_slice(&id.to_be_bytes());
        ip.extend_from_slice(&[0x40, 0, 64, 6, 0, 0]); // don't fragment, TTL 64, TCP, checksum
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        let sum = checksum(&[&ip]);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        ip.extend_from_slice(&tcp);
        ip
    }

    /// The Ethernet frame en0 carries it in.
    pub fn frame(&self, id: u16) -> Vec<u8> {
        let (to, from) = match self.direction {
            Direction::Out => (ROUTER_MAC, PHONE_MAC),
            Direction::In => (PHONE_MAC, ROUTER_MAC),
        };
        [&to[..], &from[..], &[0x08, 0x00], &self.ipv4(id)].concat()
    }
}

/// A name in a fixed NUL-padded field (always NUL-terminated, as the kernel's are).
fn cstr(out: &mut Vec<u8>, s: &str, len: usize) {
    let b = s.as_bytes();
    let n = b.len().min(len - 1);
    out.extend_from_slice(&b[..n]);
    out.extend(std::iter::repeat_n(0, len - n));
}

/// What pcapd sends for one packet of process `pid` (`comm`) on en0: header + frame.
pub fn record(direction: Direction, pid: u32, comm: &str, at: SystemTime, frame: &[u8]) -> Vec<u8> {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut h = Vec::with_capacity(HEADER_LEN as usize + frame.len());
    h.extend_from_slice(&HEADER_LEN.to_be_bytes());
    h.push(HEADER_VERSION);
    h.extend_from_slice(&(frame.len() as u32).to_be_bytes());
    h.push(IFT_ETHER);
    h.extend_from_slice(&0u16.to_be_bytes()); // unit: en0
    h.push(direction as u8);
    h.extend_from_slice(&AF_INET.to_be_bytes());
    h.extend_from_slice(&(ETHERNET_LEN as u32).to_be_bytes());
    h.extend_from_slice(&0u32.to_be_bytes()); // frame_post_length
    cstr(&mut h, "en0", 16);
    h.extend_from_slice(&pid.to_le_bytes());
    cstr(&mut h, comm, 17);
    h.extend_from_slice(&0u32.to_be_bytes()); // svc
    h.extend_from_slice(&pid.to_le_bytes()); // epid: the app sends for itself
    cstr(&mut h, comm, 17);
    h.extend_from_slice(&(since.as_secs() as u32).to_be_bytes());
    h.extend_from_slice(&since.subsec_micros().to_be_bytes());
    debug_assert_eq!(h.len(), HEADER_LEN as usize);
    h.extend_from_slice(frame);
    h
}

/// The segments of one HTTP exchange on a fresh connection that the server closes after
/// its response (`Connection: close`): handshake, the request, the response in MSS-sized
/// segments, the app's ACK, then both FINs. `response` may be empty (no answer).
pub fn exchange(
    app: SocketAddrV4,
    server: SocketAddrV4,
    isn: (u32, u32),
    request: &[u8],
    response: &[u8],
) -> Vec<Segment> {
    let (mut a, mut s) = isn;
    let mut out = Vec::new();
    let mut push = |direction, seq: u32, ack: u32, flags, payload: &[u8]| {
        let (src, dst) = if direction == Direction::Out { (app, server) } else { (server, app) };
        out.push(Segment { direction, src, dst, seq, ack, flags, payload: payload.to_vec() });
    };
    push(Direction::Out, a, 0, SYN, &[]);
    a = a.wrapping_add(1);
    push(Direction::In, s, a, SYN | ACK, &[]);
    s = s.wrapping_add(1);
    push(Direction::Out, a, s, ACK, &[]);
    push(Direction::Out, a, s, PSH | ACK, request);
    a = a.wrapping_add(request.len() as u32);
    let chunks: Vec<&[u8]> = response.chunks(MSS).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let flags = if i + 1 == chunks.len() { PSH | ACK } else { ACK };
        push(Direction::In, s, a, flags, chunk);
        s = s.wrapping_add(chunk.len() as u32);
    }
    push(Direction::In, s, a, FIN | ACK, &[]);
    s = s.wrapping_add(1);
    push(Direction::Out, a, s, FIN | ACK, &[]);
    a = a.wrapping_add(1);
    push(Direction::In, s, a, ACK, &[]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn a_record_reads_back_through_the_crates_device_packet() {
        let app = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 50123);
        let server = SocketAddrV4::new(Ipv4Addr::new(93, 184, 216, 34), 80);
        let seg = Segment {
            direction: Direction::Out,
            src: app,
            dst: server,
            seq: 1,
            ack: 2,
            flags: PSH | ACK,
            payload: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        };
        let frame = seg.frame(7);
        let at = UNIX_EPOCH + std::time::Duration::from_micros(1_700_000_000_123_456);
        let bytes = record(Direction::Out, 1001, "a-very-long-executable-name", at, &frame);
        let p = idevice::pcapd::DevicePacket::from_vec(&bytes).unwrap();
        assert_eq!((p.header_length, p.header_version, p.packet_length as usize), (95, 2, frame.len()));
        assert_eq!((p.interface_type, p.unit, p.io, p.protocol_family), (6, 0, 1, 2));
        assert_eq!((p.frame_pre_length, p.frame_post_length, p.interface_name.as_str()), (14, 0, "en0"));
        assert_eq!((p.pid, p.epid, p.svc), (1001, 1001, 0));
        assert_eq!((p.comm.as_str(), p.ecomm.as_str()), ("a-very-long-exec", "a-very-long-exec"), "16 bytes and a NUL");
        assert_eq!((p.seconds, p.microseconds), (1_700_000_000, 123_456));
        assert_eq!(p.data, frame);

        let ip = &frame[14..];
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, ip.len(), "IPv4 total length");
        assert_eq!(checksum(&[&ip[..20]]), 0, "a valid header checksum sums to zero");
        let pseudo =
            [&[10, 0, 0, 2][..], &[93, 184, 216, 34], &[0, 6], &((ip.len() - 20) as u16).to_be_bytes()].concat();
        assert_eq!(checksum(&[&pseudo, &ip[20..]]), 0, "and so does the TCP checksum");
        assert_eq!(&ip[40..], b"GET / HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn an_exchange_numbers_its_segments_and_splits_the_response() {
        let app = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 50000);
        let server = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080);
        let response = vec![b'x'; MSS + 10];
        let segs = exchange(app, server, (100, 900), b"GET /", &response);
        let flags: Vec<u8> = segs.iter().map(|s| s.flags).collect();
        assert_eq!(flags, [SYN, SYN | ACK, ACK, PSH | ACK, ACK, PSH | ACK, FIN | ACK, FIN | ACK, ACK]);
        let sent: usize = segs.iter().filter(|s| s.direction == Direction::Out).map(|s| s.payload.len()).sum();
        let got: usize = segs.iter().filter(|s| s.direction == Direction::In).map(|s| s.payload.len()).sum();
        assert_eq!((sent, got), (5, MSS + 10));
        // Each side's sequence numbers advance by what it sent (SYN and FIN count one).
        assert_eq!((segs[3].seq, segs[4].ack), (101, 106));
        assert_eq!((segs[5].seq, segs[7].seq, segs[8].ack), (901 + MSS as u32, 106, 106 + 1));
        assert_eq!(segs[8].seq, 901 + response.len() as u32 + 1);
    }
}
