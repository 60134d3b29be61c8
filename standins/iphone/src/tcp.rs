//! The phone's TCP inside the CoreDevice tunnel: IPv6 packets (RFC 8200) carrying TCP
//! (RFC 9293), written here rather than taken from a stack crate so the stand-in shares
//! nothing with the host's userspace stack and needs no new dependency. The tunnel is a
//! reliable stream, so nothing is ever lost and nothing is retransmitted; everything else
//! is real: the three-way handshake, sequence and acknowledgement numbers, the peer's
//! receive window honoured and ours advertised (and reopened), checksums over the IPv6
//! pseudo-header (bad segments dropped), FIN both ways, RST for a port with no listener.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::Ipv6Addr;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;

const IPV6_HEADER: usize = 40;
const TCP_HEADER: usize = 20;
const NEXT_HEADER_TCP: u8 = 6;
const HOP_LIMIT: u8 = 64;
/// What the peer may send before we read: our receive window (no window scaling offered).
const RECEIVE_BUFFER: usize = 65535;
/// Without an MSS option from the peer, IPv6's default (1280 − 40 − 20, RFC 9293 §3.7.1).
const DEFAULT_MSS: usize = 1220;
/// A write that the peer's window holds back longer than this fails.
const WINDOW_WAIT: Duration = Duration::from_secs(60);

/// One TCP segment and the addresses of its IPv6 packet.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub options: Vec<u8>,
    pub payload: Vec<u8>,
}

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// The one's-complement sum of the pseudo-header and the TCP segment (RFC 8200 §8.1).
fn checksum(src: &Ipv6Addr, dst: &Ipv6Addr, tcp: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut add = |bytes: &[u8]| {
        for pair in bytes.chunks(2) {
            let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
            sum += u32::from(word);
        }
    };
    add(&src.octets());
    add(&dst.octets());
    add(&(tcp.len() as u32).to_be_bytes());
    add(&[0, 0, 0, NEXT_HEADER_TCP]);
    add(tcp);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Segment {
    /// The whole IPv6 packet.
    pub fn encode(&self) -> Vec<u8> {
        let mut options = self.options.clone();
        while !options.len().is_multiple_of(4) {
            options.push(0); // end of option list / padding
        }
        let offset_words = ((TCP_HEADER + options.len()) / 4) as u8;
        let mut tcp = Vec::with_capacity(TCP_HEADER + options.len() + self.payload.len());
        tcp.extend_from_slice(&self.src_port.to_be_bytes());
        tcp.extend_from_slice(&self.dst_port.to_be_bytes());
        tcp.extend_from_slice(&self.seq.to_be_bytes());
        tcp.extend_from_slice(&self.ack.to_be_bytes());
        tcp.push(offset_words << 4);
        tcp.push(self.flags);
        tcp.extend_from_slice(&self.window.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
        tcp.extend_from_slice(&options);
        tcp.extend_from_slice(&self.payload);
        let sum = checksum(&self.src, &self.dst, &tcp);
        tcp[16..18].copy_from_slice(&sum.to_be_bytes());

        let mut ip = Vec::with_capacity(IPV6_HEADER + tcp.len());
        ip.extend_from_slice(&[0x60, 0, 0, 0]); // version 6, traffic class 0, flow label 0
        ip.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
        ip.push(NEXT_HEADER_TCP);
        ip.push(HOP_LIMIT);
        ip.extend_from_slice(&self.src.octets());
        ip.extend_from_slice(&self.dst.octets());
        ip.extend_from_slice(&tcp);
        ip
    }

    /// A TCP segment out of one IPv6 packet; its checksum must hold.
    pub fn parse(packet: &[u8]) -> io::Result<Segment> {
        if packet.len() < IPV6_HEADER || packet[0] >> 4 != 6 {
            return Err(invalid("not an IPv6 packet"));
        }
        let len = u16::from_be_bytes([packet[4], packet[5]]) as usize;
        if packet[6] != NEXT_HEADER_TCP {
            return Err(invalid(format!("IPv6 next header {} is not TCP", packet[6])));
        }
        let tcp = packet.get(IPV6_HEADER..IPV6_HEADER + len).ok_or_else(|| invalid("IPv6 payload cut short"))?;
        let src = Ipv6Addr::from(<[u8; 16]>::try_from(&packet[8..24]).unwrap());
        let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&packet[24..40]).unwrap());
        if tcp.len() < TCP_HEADER {
            return Err(invalid("TCP header cut short"));
        }
        if checksum(&src, &dst, tcp) != 0 {
            return Err(invalid("TCP checksum does not hold"));
        }
        let offset = usize::from(tcp[12] >> 4) * 4;
        if !(TCP_HEADER..=tcp.len()).contains(&offset) {
            return Err(invalid(format!("TCP data offset {offset}")));
        }
        let u16_at = |i: usize| u16::from_be_bytes([tcp[i], tcp[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes(tcp[i..i + 4].try_into().unwrap());
        Ok(Segment {
            src,
            dst,
            src_port: u16_at(0),
            dst_port: u16_at(2),
            seq: u32_at(4),
            ack: u32_at(8),
            flags: tcp[13],
            window: u16_at(14),
            options: tcp[TCP_HEADER..offset].to_vec(),
            payload: tcp[offset..].to_vec(),
        })
    }

    /// The peer's MSS option (kind 2), if it sent one.
    fn mss_option(&self) -> Option<u16> {
        let o = &self.options;
        let mut i = 0;
        while i < o.len() {
            match o[i] {
                0 => break,
                1 => i += 1,
                kind => {
                    let len = usize::from(*o.get(i + 1)?).max(2);
                    if kind == 2 && len == 4 {
                        return Some(u16::from_be_bytes([*o.get(i + 2)?, *o.get(i + 3)?]));
                    }
                    i += len;
                }
            }
        }
        None
    }
}

/// `a < b` in sequence space.
fn seq_lt(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) > 0
}

/// Where packets go: the tunnel's host side, one whole packet at a time.
pub struct Link {
    out: Mutex<UnixStream>,
    pub local: Ipv6Addr,
    pub peer: Ipv6Addr,
}

impl Link {
    pub fn new(out: UnixStream, local: Ipv6Addr, peer: Ipv6Addr) -> Self {
        Link { out: Mutex::new(out), local, peer }
    }

    fn send(&self, s: &Segment) -> io::Result<()> {
        let mut out = self.out.lock().unwrap();
        out.write_all(&s.encode())?;
        out.flush()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    SynReceived,
    Established,
}

struct State {
    phase: Phase,
    /// Oldest of ours the peer has not acknowledged, and the next we send.
    snd_una: u32,
    snd_nxt: u32,
    /// The next byte we expect from the peer.
    rcv_nxt: u32,
    peer_window: u32,
    mss: usize,
    received: VecDeque<u8>,
    fin_received: bool,
    fin_sent: bool,
    /// Reset by the peer, or the tunnel is gone.
    broken: bool,
    advertised: u16,
    /// How long a write waits for the peer's window to open.
    window_wait: Duration,
}

impl State {
    fn window(&self) -> u16 {
        RECEIVE_BUFFER.saturating_sub(self.received.len()).min(usize::from(u16::MAX)) as u16
    }
}

/// One connection to a port of the phone.
pub struct Conn {
    link: Arc<Link>,
    local_port: u16,
    peer_port: u16,
    state: Mutex<State>,
    changed: Condvar,
    /// The service's Streams of this connection: the last one dropped sends the FIN.
    handles: AtomicUsize,
}

impl Conn {
    fn segment(&self, st: &mut State, flags: u8, seq: u32, payload: &[u8]) -> Segment {
        st.advertised = st.window();
        Segment {
            src: self.link.local,
            dst: self.link.peer,
            src_port: self.local_port,
            dst_port: self.peer_port,
            seq,
            ack: if flags & ACK != 0 { st.rcv_nxt } else { 0 },
            flags,
            window: st.advertised,
            options: Vec::new(),
            payload: payload.to_vec(),
        }
    }

    pub fn local_port(&self) -> u16 {
        self.local_port
    }
}

/// The listening ports and the connections of one tunnel.
pub struct Stack {
    link: Arc<Link>,
    listening: Vec<u16>,
    conns: HashMap<(u16, u16), Arc<Conn>>,
    next_iss: u32,
}

impl Stack {
    pub fn new(link: Arc<Link>, listening: Vec<u16>, iss_seed: u32) -> Self {
        Stack { link, listening, conns: HashMap::new(), next_iss: iss_seed }
    }

    /// Starts or stops listening on `port` (connections made stay).
    pub fn listen(&mut self, port: u16, on: bool) {
        self.listening.retain(|p| *p != port);
        if on {
            self.listening.push(port);
        }
    }

    fn reset_for(&self, s: &Segment) -> io::Result<()> {
        if s.flags & RST != 0 {
            return Ok(()); // never answer a reset with one
        }
        // RFC 9293 §3.10.7.1: seq from the segment's ACK, or 0 and an ACK of what it held.
        let (seq, ack, flags) = if s.flags & ACK != 0 {
            (s.ack, 0, RST)
        } else {
            let len = s.payload.len() as u32 + u32::from(s.flags & SYN != 0) + u32::from(s.flags & FIN != 0);
            (0, s.seq.wrapping_add(len), RST | ACK)
        };
        self.link.send(&Segment {
            src: self.link.local,
            dst: self.link.peer,
            src_port: s.dst_port,
            dst_port: s.src_port,
            seq,
            ack,
            flags,
            window: 0,
            options: Vec::new(),
            payload: Vec::new(),
        })
    }

    /// Handles one segment from the host; a connection whose handshake it completed, to be
    /// served.
    pub fn handle(&mut self, s: &Segment) -> io::Result<Option<Arc<Conn>>> {
        let key = (s.dst_port, s.src_port);
        let Some(conn) = self.conns.get(&key).cloned() else {
            if s.flags & (SYN | ACK | RST) == SYN && self.listening.contains(&s.dst_port) {
                self.accept(s)?;
                return Ok(None);
            }
            return self.reset_for(s).map(|()| None);
        };
        let mut st = conn.state.lock().unwrap();
        if s.flags & RST != 0 {
            st.broken = true;
            drop(st);
            conn.changed.notify_all();
            self.conns.remove(&key);
            return Ok(None);
        }
        if s.flags & SYN != 0 {
            // Our SYN-ACK crossed a retransmitted SYN: say it again.
            if st.phase == Phase::SynReceived {
                let iss = st.snd_una;
                let mut syn_ack = conn.segment(&mut st, SYN | ACK, iss, &[]);
                syn_ack.options = mss_option();
                self.link.send(&syn_ack)?;
            }
            return Ok(None);
        }
        let mut accepted = None;
        if s.flags & ACK != 0 {
            let acked = s.ack;
            if seq_lt(st.snd_una, acked) && !seq_lt(st.snd_nxt, acked) {
                st.snd_una = acked;
            }
            st.peer_window = u32::from(s.window);
            if st.phase == Phase::SynReceived && st.snd_una == st.snd_nxt {
                st.phase = Phase::Established;
                accepted = Some(Arc::clone(&conn));
            }
        }
        let mut answer = false;
        if !s.payload.is_empty() {
            let end = s.seq.wrapping_add(s.payload.len() as u32);
            // In order, or overlapping what we have: take the new part. Later data
            // cannot come on this link (nothing is lost), earlier data is a duplicate.
            if !seq_lt(st.rcv_nxt, s.seq) && seq_lt(st.rcv_nxt, end) && !st.fin_received {
                let skip = st.rcv_nxt.wrapping_sub(s.seq) as usize;
                st.received.extend(&s.payload[skip..]);
                st.rcv_nxt = end;
            }
            answer = true;
        }
        if s.flags & FIN != 0 {
            let end = s.seq.wrapping_add(s.payload.len() as u32);
            if end == st.rcv_nxt && !st.fin_received {
                st.rcv_nxt = st.rcv_nxt.wrapping_add(1);
                st.fin_received = true;
            }
            answer = true;
        }
        if answer {
            let seq = st.snd_nxt;
            let ack = conn.segment(&mut st, ACK, seq, &[]);
            self.link.send(&ack)?;
        }
        let finished = st.fin_received && st.fin_sent && st.snd_una == st.snd_nxt;
        drop(st);
        conn.changed.notify_all();
        if finished {
            self.conns.remove(&key);
        }
        Ok(accepted)
    }

    fn accept(&mut self, s: &Segment) -> io::Result<()> {
        let iss = self.next_iss;
        self.next_iss = self.next_iss.wrapping_add(0x0100_0000 + 0x1234);
        let ours = usize::from(crate::tunnel::MTU) - IPV6_HEADER - TCP_HEADER;
        let mss = s.mss_option().map_or(DEFAULT_MSS, |m| usize::from(m).min(ours)).max(64);
        let conn = Arc::new(Conn {
            link: Arc::clone(&self.link),
            local_port: s.dst_port,
            peer_port: s.src_port,
            state: Mutex::new(State {
                phase: Phase::SynReceived,
                snd_una: iss,
                snd_nxt: iss.wrapping_add(1),
                rcv_nxt: s.seq.wrapping_add(1),
                // A SYN's window is never scaled; we offer no scaling, so none applies later.
                peer_window: u32::from(s.window),
                mss,
                received: VecDeque::new(),
                fin_received: false,
                fin_sent: false,
                broken: false,
                advertised: 0,
                window_wait: WINDOW_WAIT,
            }),
            handles: AtomicUsize::new(0),
            changed: Condvar::new(),
        });
        let mut st = conn.state.lock().unwrap();
        let mut syn_ack = conn.segment(&mut st, SYN | ACK, iss, &[]);
        syn_ack.options = mss_option();
        drop(st);
        self.conns.insert((s.dst_port, s.src_port), Arc::clone(&conn));
        self.link.send(&syn_ack)
    }

    /// The tunnel is gone: every connection fails.
    pub fn shut(&mut self) {
        for (_, conn) in self.conns.drain() {
            conn.state.lock().unwrap().broken = true;
            conn.changed.notify_all();
        }
    }
}

/// Our MSS: what fits the tunnel's packets (its MTU less the headers).
fn mss_option() -> Vec<u8> {
    let mss = crate::tunnel::MTU - (IPV6_HEADER + TCP_HEADER) as u16;
    let [hi, lo] = mss.to_be_bytes();
    vec![2, 4, hi, lo]
}

/// A service's end of a connection: blocking reads and writes, FIN when the last handle
/// of it is dropped.
pub struct Stream(Arc<Conn>);

impl Stream {
    pub fn new(conn: Arc<Conn>) -> Stream {
        conn.handles.fetch_add(1, Ordering::AcqRel);
        Stream(conn)
    }

    /// Another handle of the connection (reads and writes share its state).
    pub fn handle(&self) -> Stream {
        Stream::new(Arc::clone(&self.0))
    }

    /// How long a write waits for the host's window; `None`: the default.
    pub fn set_window_wait(&self, wait: Option<Duration>) {
        self.0.state.lock().unwrap().window_wait = wait.unwrap_or(WINDOW_WAIT);
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let conn = &self.0;
        let mut st = conn.state.lock().unwrap();
        while st.received.is_empty() && !st.fin_received && !st.broken {
            st = conn.changed.wait(st).unwrap();
        }
        if st.received.is_empty() {
            return if st.broken { Err(io::ErrorKind::ConnectionReset.into()) } else { Ok(0) };
        }
        let n = buf.len().min(st.received.len());
        for (b, v) in buf.iter_mut().zip(st.received.drain(..n)) {
            *b = v;
        }
        // A window we let shrink below half is reopened at once (the peer does not probe).
        let now = st.window();
        if usize::from(st.advertised) < RECEIVE_BUFFER / 2 && usize::from(now) >= RECEIVE_BUFFER / 2 && !st.broken {
            let seq = st.snd_nxt;
            let update = conn.segment(&mut st, ACK, seq, &[]);
            drop(st);
            conn.link.send(&update)?;
        }
        Ok(n)
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let conn = &self.0;
        let mut st = conn.state.lock().unwrap();
        let chunk = buf.len().min(st.mss);
        loop {
            if st.broken || st.fin_sent {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let in_flight = st.snd_nxt.wrapping_sub(st.snd_una) as usize;
            let room = (st.peer_window as usize).saturating_sub(in_flight);
            if room > 0 {
                let n = chunk.min(room);
                let seq = st.snd_nxt;
                st.snd_nxt = seq.wrapping_add(n as u32);
                let segment = conn.segment(&mut st, PSH | ACK, seq, &buf[..n]);
                drop(st);
                conn.link.send(&segment)?;
                return Ok(n);
            }
            let wait = st.window_wait;
            let (next, timeout) = conn.changed.wait_timeout(st, wait).unwrap();
            st = next;
            if timeout.timed_out() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "the host's receive window stayed shut"));
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let conn = &self.0;
        if conn.handles.fetch_sub(1, Ordering::AcqRel) > 1 {
            return; // another handle still serves the connection
        }
        let mut st = conn.state.lock().unwrap();
        if st.broken || st.fin_sent {
            return;
        }
        let seq = st.snd_nxt;
        st.snd_nxt = seq.wrapping_add(1);
        st.fin_sent = true;
        let fin = conn.segment(&mut st, FIN | ACK, seq, &[]);
        drop(st);
        let _ = conn.link.send(&fin);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(last: u16) -> Ipv6Addr {
        Ipv6Addr::new(0xfd35, 0xd15d, 0x09fc, 0, 0, 0, 0, last)
    }

    fn host_segment(flags: u8, seq: u32, ack: u32, payload: &[u8]) -> Segment {
        Segment {
            src: addr(2),
            dst: addr(1),
            src_port: 40000,
            dst_port: 58783,
            seq,
            ack,
            flags,
            window: 65534,
            options: vec![3, 3, 8], // window scale 8, as the host's stack asks
            payload: payload.to_vec(),
        }
    }

    #[test]
    fn a_segment_round_trips_with_a_checksum_that_sums_to_zero() {
        let s = host_segment(PSH | ACK, 7, 9, b"hello");
        let packet = s.encode();
        assert_eq!(packet[0] >> 4, 6);
        assert_eq!(u16::from_be_bytes([packet[4], packet[5]]) as usize, packet.len() - IPV6_HEADER);
        let mut parsed = Segment::parse(&packet).unwrap();
        assert_eq!(parsed.options, vec![3, 3, 8, 0], "options padded to a word");
        parsed.options.truncate(3);
        assert_eq!(parsed, s);
        // Odd lengths sum with a zero pad byte.
        assert!(Segment::parse(&host_segment(ACK, 1, 1, b"odd").encode()).is_ok());
        let mut flipped = packet.clone();
        *flipped.last_mut().unwrap() ^= 0x40;
        assert!(Segment::parse(&flipped).unwrap_err().to_string().contains("checksum"));
    }

    #[test]
    fn the_checksum_is_rfc_1071s_ones_complement_sum() {
        // RFC 1071's worked example: the words 0x0001 f203 f4f5 f6f7 sum to 0xddf2.
        let mut sum: u32 = [0x0001u32, 0xf203, 0xf4f5, 0xf6f7].iter().sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xddf2);
        // Ours over an all-zero pseudo-header and segment is that of the length and protocol only.
        let zero = Ipv6Addr::UNSPECIFIED;
        assert_eq!(checksum(&zero, &zero, &[0; 20]), !(20u16 + 6));
    }

    fn pair() -> (Stack, UnixStream) {
        let (ours, host) = UnixStream::pair().unwrap();
        let link = Arc::new(Link::new(ours, addr(1), addr(2)));
        (Stack::new(link, vec![58783], 1000), host)
    }

    fn next(host: &mut UnixStream) -> Segment {
        let mut header = [0u8; IPV6_HEADER];
        host.read_exact(&mut header).unwrap();
        let mut rest = vec![0; u16::from_be_bytes([header[4], header[5]]) as usize];
        host.read_exact(&mut rest).unwrap();
        Segment::parse(&[header.to_vec(), rest].concat()).unwrap()
    }

    #[test]
    fn handshake_data_both_ways_and_fin() {
        let (mut stack, mut host) = pair();
        assert!(stack.handle(&host_segment(SYN, 500, 0, b"")).unwrap().is_none());
        let syn_ack = next(&mut host);
        assert_eq!((syn_ack.flags, syn_ack.seq, syn_ack.ack), (SYN | ACK, 1000, 501));
        assert_eq!(syn_ack.mss_option(), Some(crate::tunnel::MTU - 60));
        let conn = stack.handle(&host_segment(ACK, 501, 1001, b"")).unwrap().expect("established");
        let mut stream = Stream::new(conn);

        assert!(stack.handle(&host_segment(PSH | ACK, 501, 1001, b"ping")).unwrap().is_none());
        let ack = next(&mut host);
        assert_eq!((ack.flags, ack.ack, ack.window), (ACK, 505, 65535 - 4));
        let mut got = [0u8; 8];
        assert_eq!(stream.read(&mut got).unwrap(), 4);
        assert_eq!(&got[..4], b"ping");
        // A duplicate is acknowledged again and not delivered twice.
        stack.handle(&host_segment(PSH | ACK, 501, 1001, b"ping")).unwrap();
        assert_eq!(next(&mut host).ack, 505);

        assert_eq!(stream.write(b"pong").unwrap(), 4);
        let data = next(&mut host);
        assert_eq!((data.flags, data.seq, data.ack, data.payload.as_slice()), (PSH | ACK, 1001, 505, &b"pong"[..]));

        stack.handle(&host_segment(FIN | ACK, 505, 1005, b"")).unwrap();
        assert_eq!(next(&mut host).ack, 506, "the FIN takes one number");
        assert_eq!(stream.read(&mut got).unwrap(), 0, "end of stream");
        drop(stream);
        let fin = next(&mut host);
        assert_eq!((fin.flags, fin.seq), (FIN | ACK, 1005));
        stack.handle(&host_segment(ACK, 506, 1006, b"")).unwrap();
        assert!(stack.conns.is_empty(), "closed both ways");
    }

    #[test]
    fn writes_wait_for_the_peers_window_and_segments_fit_the_mss() {
        let (mut stack, mut host) = pair();
        let mut syn = host_segment(SYN, 0, 0, b"");
        syn.window = 1500;
        syn.options = vec![2, 4, 0x01, 0xf4]; // MSS 500
        stack.handle(&syn).unwrap();
        next(&mut host);
        let mut ack = host_segment(ACK, 1, 1001, b"");
        ack.window = 1500;
        let mut stream = Stream::new(stack.handle(&ack).unwrap().unwrap());
        let writer = std::thread::spawn(move || {
            stream.write_all(&[7u8; 2000]).unwrap();
            stream
        });
        let mut seen = 0;
        for _ in 0..3 {
            let s = next(&mut host);
            assert_eq!(s.payload.len(), 500);
            seen += 500;
        }
        // 1500 in flight fills the window: nothing more until the host acknowledges.
        std::thread::sleep(Duration::from_millis(100));
        let mut more = host_segment(ACK, 1, 1001 + seen, b"");
        more.window = 1500;
        stack.handle(&more).unwrap();
        assert_eq!(next(&mut host).payload.len(), 500);
        let _stream = writer.join().unwrap();
    }

    #[test]
    fn a_port_with_no_listener_resets_and_a_reset_breaks_the_connection() {
        let (mut stack, mut host) = pair();
        let mut syn = host_segment(SYN, 41, 0, b"");
        syn.dst_port = 1;
        stack.handle(&syn).unwrap();
        let rst = next(&mut host);
        assert_eq!((rst.flags, rst.ack), (RST | ACK, 42));

        stack.handle(&host_segment(SYN, 0, 0, b"")).unwrap();
        next(&mut host);
        let mut stream = Stream::new(stack.handle(&host_segment(ACK, 1, 1001, b"")).unwrap().unwrap());
        stack.handle(&host_segment(RST, 1, 0, b"")).unwrap();
        assert_eq!(stream.read(&mut [0; 4]).unwrap_err().kind(), io::ErrorKind::ConnectionReset);
        assert_eq!(stream.write(b"x").unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn the_fin_waits_for_the_last_handle_and_a_shut_window_fails_writes_after_the_wait() {
        let (mut stack, mut host) = pair();
        stack.handle(&host_segment(SYN, 0, 0, b"")).unwrap();
        next(&mut host);
        let mut ack = host_segment(ACK, 1, 1001, b"");
        ack.window = 4;
        let stream = Stream::new(stack.handle(&ack).unwrap().unwrap());
        let mut writer = stream.handle();
        drop(stream);
        assert_eq!(writer.write(b"still").unwrap(), 4, "open after the first handle went");
        assert_eq!(next(&mut host).payload, b"stil");
        writer.set_window_wait(Some(Duration::from_millis(50)));
        let e = writer.write(b"l").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        drop(writer);
        assert_eq!(next(&mut host).flags, FIN | ACK, "the last handle's drop");
    }

    #[test]
    fn a_port_stops_and_starts_listening() {
        let (mut stack, mut host) = pair();
        stack.listen(58783, false);
        stack.handle(&host_segment(SYN, 0, 0, b"")).unwrap();
        assert_eq!(next(&mut host).flags, RST | ACK);
        stack.listen(58783, true);
        stack.handle(&host_segment(SYN, 0, 0, b"")).unwrap();
        assert_eq!(next(&mut host).flags, SYN | ACK);
    }
}
