//! RemoteXPC's transport, the phone's side: HTTP/2 (RFC 9113) as a frame layer only — no
//! HPACK (the host's HEADERS carry no fields that matter) — with XPC messages (xpc.rs) in
//! the DATA of stream 1 (the host's requests, "client-server"), stream 3 (the phone's
//! replies, "server-client") and the even streams of file transfers, as pymobiledevice3's
//! `remote/remotexpc.py` and go-ios's `ios/http`/`ios/xpc` describe the conversation.
//!
//! Flow control is real both ways: the phone sends DATA only within the host's connection
//! and stream windows (its SETTINGS INITIAL_WINDOW_SIZE and WINDOW_UPDATEs), waiting for
//! more when they run out, and gives back the window of every DATA frame it receives.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Read, Write};

use crate::xpc::{self, Message, Xpc};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const PADDED: u8 = 0x8;
const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
/// RFC 9113 §6.5.2's defaults, until the host's SETTINGS say otherwise.
const DEFAULT_WINDOW: i64 = 65535;
const DEFAULT_MAX_FRAME: usize = 16384;
/// What the phone announces: the settings the host announces to it (pymobiledevice3 sniffed
/// them from `remoted`); the idevice crate reads no other setting.
const OUR_MAX_STREAMS: u32 = 100;
const OUR_WINDOW: u32 = 1 << 20;

pub const ROOT: u32 = 1;
pub const REPLY: u32 = 3;

#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn encode(&self) -> Vec<u8> {
        let len = self.payload.len() as u32;
        let mut out = len.to_be_bytes()[1..].to_vec();
        out.push(self.kind);
        out.push(self.flags);
        out.extend_from_slice(&(self.stream & 0x7fff_ffff).to_be_bytes());
        out.extend_from_slice(&self.payload);
        out
    }

    /// One frame; `None` at a clean end of stream.
    pub fn read_from(r: &mut impl Read, max: usize) -> io::Result<Option<Frame>> {
        let mut header = [0u8; 9];
        if !crate::wire::read_exact_or_eof(r, &mut header)? {
            return Ok(None);
        }
        let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        if len > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("HTTP/2 frame of {len} bytes (FRAME_SIZE_ERROR)"),
            ));
        }
        let mut payload = vec![0; len];
        r.read_exact(&mut payload)?;
        let stream = u32::from_be_bytes(header[5..9].try_into().unwrap()) & 0x7fff_ffff;
        Ok(Some(Frame { kind: header[3], flags: header[4], stream, payload }))
    }
}

fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    pairs.iter().flat_map(|(k, v)| k.to_be_bytes().into_iter().chain(v.to_be_bytes())).collect()
}

/// A RemoteXPC connection as the phone serves it.
pub struct XpcConn<S: Read + Write> {
    s: S,
    conn_window: i64,
    stream_windows: HashMap<u32, i64>,
    peer_initial_window: i64,
    peer_max_frame: usize,
    /// DATA received and not yet taken as messages, by stream.
    inbox: BTreeMap<u32, Vec<u8>>,
    opened: HashSet<u32>,
    /// The phone's next message id on each stream.
    next_id: HashMap<u32, u64>,
}

impl<S: Read + Write> XpcConn<S> {
    /// Reads the host's preface and announces the phone's settings.
    pub fn accept(mut s: S) -> io::Result<Option<Self>> {
        let mut preface = [0u8; 24];
        if !crate::wire::read_exact_or_eof(&mut s, &mut preface)? {
            return Ok(None);
        }
        if preface != PREFACE {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not the HTTP/2 client preface"));
        }
        let mut c = XpcConn {
            s,
            conn_window: DEFAULT_WINDOW,
            stream_windows: HashMap::new(),
            peer_initial_window: DEFAULT_WINDOW,
            peer_max_frame: DEFAULT_MAX_FRAME,
            inbox: BTreeMap::new(),
            opened: HashSet::new(),
            next_id: HashMap::new(),
        };
        let ours =
            settings(&[(SETTINGS_MAX_CONCURRENT_STREAMS, OUR_MAX_STREAMS), (SETTINGS_INITIAL_WINDOW_SIZE, OUR_WINDOW)]);
        c.write(Frame { kind: SETTINGS, flags: 0, stream: 0, payload: ours })?;
        // The connection window is not a setting: raise it to match (as the host does).
        c.write(Frame {
            kind: WINDOW_UPDATE,
            flags: 0,
            stream: 0,
            payload: (OUR_WINDOW - 65535).to_be_bytes().to_vec(),
        })?;
        Ok(Some(c))
    }

    fn write(&mut self, f: Frame) -> io::Result<()> {
        self.s.write_all(&f.encode())?;
        self.s.flush()
    }

    fn window_of(&mut self, stream: u32) -> &mut i64 {
        let initial = self.peer_initial_window;
        self.stream_windows.entry(stream).or_insert(initial)
    }

    /// Reads and handles one frame; `false` when the host has gone (end of stream, GOAWAY).
    fn pump(&mut self) -> io::Result<bool> {
        let Some(f) = Frame::read_from(&mut self.s, DEFAULT_MAX_FRAME)? else { return Ok(false) };
        match f.kind {
            DATA => {
                let mut data = f.payload.as_slice();
                if f.flags & PADDED != 0 {
                    let pad = usize::from(*data.first().unwrap_or(&0));
                    data = data.get(1..data.len().saturating_sub(pad)).unwrap_or_default();
                }
                self.inbox.entry(f.stream).or_default().extend_from_slice(data);
                let n = f.payload.len() as u32;
                if n > 0 {
                    // Give the window back at once, for the connection and the stream.
                    for stream in [0, f.stream] {
                        self.write(Frame { kind: WINDOW_UPDATE, flags: 0, stream, payload: n.to_be_bytes().to_vec() })?;
                    }
                }
            }
            HEADERS => {
                self.opened.insert(f.stream);
            }
            SETTINGS if f.flags & ACK == 0 => {
                for entry in f.payload.chunks_exact(6) {
                    let id = u16::from_be_bytes([entry[0], entry[1]]);
                    let value = u32::from_be_bytes(entry[2..6].try_into().unwrap());
                    match id {
                        SETTINGS_INITIAL_WINDOW_SIZE => {
                            // Every open stream's window moves by the change (RFC 9113 §6.9.2).
                            let delta = i64::from(value) - self.peer_initial_window;
                            self.peer_initial_window = i64::from(value);
                            self.stream_windows.values_mut().for_each(|w| *w += delta);
                        }
                        SETTINGS_MAX_FRAME_SIZE => self.peer_max_frame = value as usize,
                        _ => {}
                    }
                }
                self.write(Frame { kind: SETTINGS, flags: ACK, stream: 0, payload: Vec::new() })?;
            }
            WINDOW_UPDATE if f.payload.len() == 4 => {
                let n = i64::from(u32::from_be_bytes(f.payload[..4].try_into().unwrap()) & 0x7fff_ffff);
                if f.stream == 0 {
                    self.conn_window += n;
                } else {
                    *self.window_of(f.stream) += n;
                }
            }
            PING if f.flags & ACK == 0 => {
                self.write(Frame { kind: PING, flags: ACK, stream: 0, payload: f.payload })?
            }
            GOAWAY => return Ok(false),
            // SETTINGS and PING acknowledgements, RST_STREAM, PRIORITY: nothing to do.
            _ => {}
        }
        Ok(true)
    }

    fn take_buffered(&mut self) -> io::Result<Option<(u32, Message)>> {
        for (stream, buf) in self.inbox.iter_mut() {
            if let Some((m, used)) = Message::decode(buf)? {
                buf.drain(..used);
                return Ok(Some((*stream, m)));
            }
        }
        Ok(None)
    }

    /// The next message the host sends, on any stream, with the stream; `None` once it has
    /// gone. The opening messages of a connection are answered here, in kind: an empty
    /// dictionary on stream 1 with an empty dictionary, INIT_HANDSHAKE on stream 3 with an
    /// INIT_HANDSHAKE (the phone's side of the opening is not captured in the sources; the
    /// clients skip both).
    pub fn next(&mut self) -> io::Result<Option<(u32, Message)>> {
        loop {
            while let Some((stream, m)) = self.take_buffered()? {
                match (&m.body, stream) {
                    (Some(b), ROOT) if b.is_empty_dictionary() => {
                        self.send(ROOT, xpc::ALWAYS_SET, Some(Xpc::Dictionary(Vec::new())))?
                    }
                    (None, REPLY) if m.flags & xpc::INIT_HANDSHAKE != 0 => {
                        self.send(REPLY, xpc::ALWAYS_SET | xpc::INIT_HANDSHAKE, None)?
                    }
                    // The host's 0x201 marker after the opening, and other bodyless
                    // messages outside file transfers, carry nothing to answer.
                    (None, s) if s % 2 == 1 => {}
                    _ => return Ok(Some((stream, m))),
                }
            }
            if !self.pump()? {
                return Ok(None);
            }
        }
    }

    /// Sends a message under the phone's next id on `stream`.
    pub fn send(&mut self, stream: u32, flags: u32, body: Option<Xpc>) -> io::Result<()> {
        let id = self.next_id.entry(stream).or_insert(0);
        let m = Message { flags, id: *id, body };
        *id += 1;
        self.send_data(stream, &m.encode(), false)
    }

    /// The reply to request `id`, on the reply stream.
    pub fn reply(&mut self, id: u64, body: Xpc) -> io::Result<()> {
        let m = Message { flags: xpc::ALWAYS_SET | xpc::DATA_PRESENT | xpc::REPLY, id, body: Some(body) };
        self.send_data(REPLY, &m.encode(), false)
    }

    /// DATA on `stream` within the host's windows, waiting (reading its frames) for more.
    pub fn send_data(&mut self, stream: u32, data: &[u8], end_stream: bool) -> io::Result<()> {
        let flags = |last: bool| if end_stream && last { END_STREAM } else { 0 };
        if data.is_empty() {
            return self.write(Frame { kind: DATA, flags: flags(true), stream, payload: Vec::new() });
        }
        let mut sent = 0;
        while sent < data.len() {
            let room = self.conn_window.min(*self.window_of(stream)).min(self.peer_max_frame as i64);
            if room <= 0 {
                if !self.pump()? {
                    return Err(io::ErrorKind::BrokenPipe.into());
                }
                continue;
            }
            let n = (room as usize).min(data.len() - sent);
            let payload = data[sent..sent + n].to_vec();
            sent += n;
            self.conn_window -= n as i64;
            *self.window_of(stream) -= n as i64;
            self.write(Frame { kind: DATA, flags: flags(sent == data.len()), stream, payload })?;
        }
        Ok(())
    }

    /// Whether the host opened `stream` with HEADERS.
    pub fn opened(&self, stream: u32) -> bool {
        self.opened.contains(&stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// A host's side: bytes it sends, and what the phone wrote back.
    struct Pipe {
        input: Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Pipe {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Pipe {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn frames(mut bytes: &[u8]) -> Vec<Frame> {
        let mut out = Vec::new();
        while let Some(f) = Frame::read_from(&mut bytes, 1 << 24).unwrap() {
            out.push(f);
        }
        out
    }

    fn data(stream: u32, m: &Message) -> Frame {
        Frame { kind: DATA, flags: 0, stream, payload: m.encode() }
    }

    /// The host's opening, frame for frame as pymobiledevice3's `_do_handshake` sends it.
    fn opening() -> Vec<u8> {
        let mut out = PREFACE.to_vec();
        let host_settings = settings(&[(3, 100), (4, 16 << 20)]);
        for f in [
            Frame { kind: SETTINGS, flags: 0, stream: 0, payload: host_settings },
            Frame { kind: WINDOW_UPDATE, flags: 0, stream: 0, payload: ((16u32 << 20) - 65535).to_be_bytes().to_vec() },
            Frame { kind: HEADERS, flags: 0x4, stream: 1, payload: vec![] },
            data(1, &Message { flags: xpc::ALWAYS_SET, id: 0, body: Some(Xpc::Dictionary(vec![])) }),
            Frame { kind: HEADERS, flags: 0x4, stream: 3, payload: vec![] },
            data(1, &Message { flags: 0x201, id: 0, body: None }),
            data(3, &Message { flags: xpc::ALWAYS_SET | xpc::INIT_HANDSHAKE, id: 0, body: None }),
        ] {
            out.extend(f.encode());
        }
        out
    }

    #[test]
    fn a_frame_header_is_length_type_flags_and_a_31_bit_stream() {
        let f = Frame { kind: DATA, flags: END_STREAM, stream: 0x8000_0003, payload: b"abc".to_vec() };
        let bytes = f.encode();
        assert_eq!(&bytes[..9], &[0, 0, 3, 0, 1, 0, 0, 0, 3]);
        let back = Frame::read_from(&mut bytes.as_slice(), 16384).unwrap().unwrap();
        assert_eq!((back.stream, back.payload.as_slice()), (3, &b"abc"[..]));
        let big = Frame { kind: DATA, flags: 0, stream: 1, payload: vec![0; 16385] }.encode();
        assert!(Frame::read_from(&mut big.as_slice(), 16384).is_err(), "larger than the frame size");
    }

    #[test]
    fn the_opening_is_answered_and_the_first_request_comes_through() {
        let mut input = opening();
        let request = Message {
            flags: xpc::ALWAYS_SET | xpc::DATA_PRESENT | xpc::WANTING_REPLY,
            id: 1,
            body: Some(xpc::dict([("k", "v".into())])),
        };
        // Split across two DATA frames: a message is whole only when both are in.
        let bytes = request.encode();
        for part in [&bytes[..10], &bytes[10..]] {
            input.extend(Frame { kind: DATA, flags: 0, stream: 1, payload: part.to_vec() }.encode());
        }
        let mut c = XpcConn::accept(Pipe { input: Cursor::new(input), output: Vec::new() }).unwrap().unwrap();
        let (stream, got) = c.next().unwrap().unwrap();
        assert_eq!((stream, got), (ROOT, request));
        c.reply(1, xpc::dict([("ok", true.into())])).unwrap();
        assert!(c.opened(1) && c.opened(3) && !c.opened(2));
        assert_eq!(c.next().unwrap(), None, "the host hung up");

        let out = frames(&c.s.output);
        let kinds: Vec<(u8, u8, u32)> = out.iter().map(|f| (f.kind, f.flags, f.stream)).collect();
        assert_eq!(kinds[..2], [(SETTINGS, 0, 0), (WINDOW_UPDATE, 0, 0)], "the phone's settings first");
        assert!(kinds.contains(&(SETTINGS, ACK, 0)), "the host's settings acknowledged: {kinds:?}");
        let messages: Vec<(u32, Message)> = out
            .iter()
            .filter(|f| f.kind == DATA)
            .map(|f| (f.stream, Message::decode(&f.payload).unwrap().unwrap().0))
            .collect();
        assert_eq!(messages[0], (ROOT, Message { flags: xpc::ALWAYS_SET, id: 0, body: Some(Xpc::Dictionary(vec![])) }));
        assert_eq!(messages[1], (REPLY, Message { flags: xpc::ALWAYS_SET | xpc::INIT_HANDSHAKE, id: 0, body: None }));
        let reply = &messages[2];
        assert_eq!((reply.0, reply.1.id, reply.1.flags & xpc::REPLY), (REPLY, 1, xpc::REPLY));
        // Every DATA frame of the host's got its window back, on the connection and the stream.
        let updates = out.iter().filter(|f| f.kind == WINDOW_UPDATE && f.stream != 0).count();
        assert_eq!(updates, 5, "{kinds:?}");
    }

    #[test]
    fn data_waits_for_window_updates() {
        let mut input = PREFACE.to_vec();
        // A host that allows 10 bytes per stream, then 15 more on stream 2 and 100 on the connection.
        input.extend(Frame { kind: SETTINGS, flags: 0, stream: 0, payload: settings(&[(4, 10)]) }.encode());
        input
            .extend(Frame { kind: WINDOW_UPDATE, flags: 0, stream: 2, payload: 15u32.to_be_bytes().to_vec() }.encode());
        let mut c = XpcConn::accept(Pipe { input: Cursor::new(input), output: Vec::new() }).unwrap().unwrap();
        c.pump().unwrap(); // the settings
        c.send_data(2, &[9; 25], true).unwrap();
        let sent: Vec<(usize, u8)> =
            frames(&c.s.output).iter().filter(|f| f.kind == DATA).map(|f| (f.payload.len(), f.flags)).collect();
        assert_eq!(sent, [(10, 0), (15, END_STREAM)]);
        // Nothing more is allowed, and the host has nothing more to say.
        assert_eq!(c.send_data(2, &[1], false).unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }
}
