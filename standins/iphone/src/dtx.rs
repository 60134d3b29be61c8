//! DTX, the message framing of Instruments' remote server (written from pymobiledevice3's
//! dtx/DEVELOPMENT.md and go-ios's dtx_codec; the idevice crate's dvt/message.rs is what
//! the host sends). A fragment is a 32-byte header of little-endian words (magic
//! 0x1F3D5B79, header length, fragment index and count as u16, body length, message
//! identifier, conversation index, channel code, expects-reply) and a body; a body starts
//! with a 16-byte payload header (type, three reserved bytes, aux length, aux + payload
//! length, flags), then the aux (the call's arguments) and the payload (an
//! NSKeyedArchiver plist: the selector of a call, the value of a reply).

use std::io::{self, Read};

pub const MAGIC: u32 = 0x1F3D_5B79;
const HEADER: usize = 32;
const PAYLOAD_HEADER: usize = 16;
/// The aux header's first word; the host sends 496 (pymobiledevice3 and the crate agree).
const AUX_BUFFER_SIZE: u32 = 496;
/// pymobiledevice3's ceiling for one message; anything larger is not a host talking DTX.
const MAX_MESSAGE: usize = 128 << 20;

/// DTXMessageType: an empty acknowledgement, a method call, a reply with a value, an error.
pub const KIND_OK: u8 = 0;
pub const KIND_CALL: u8 = 2;
pub const KIND_OBJECT: u8 = 3;
pub const KIND_ERROR: u8 = 4;

// Aux primitive type tags.
const T_STRING: u32 = 0x01;
const T_BUFFER: u32 = 0x02;
const T_U32: u32 = 0x03;
const T_I64: u32 = 0x06;
const T_DOUBLE: u32 = 0x09;
const T_NULL: u32 = 0x0a;
const T_DICTIONARY: u32 = 0xf0;

/// One argument of a call. A buffer usually holds an NSKeyedArchiver plist.
#[derive(Debug, Clone, PartialEq)]
pub enum Aux {
    String(String),
    Buffer(Vec<u8>),
    U32(u32),
    I64(i64),
    Double(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Dtx {
    pub identifier: u32,
    /// 0 for a call, 1 for its reply.
    pub conversation: u32,
    /// The code as on the wire: a call of the host's carries the host's (positive) code,
    /// and so does the reply; a call of the phone's on that channel carries its negation.
    pub channel: i32,
    pub expects_reply: bool,
    pub kind: u8,
    pub aux: Vec<Aux>,
    pub payload: Vec<u8>,
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().unwrap())
}

impl Dtx {
    /// A call of the phone's (conversation 0).
    pub fn call(identifier: u32, channel: i32, payload: Vec<u8>, aux: Vec<Aux>) -> Self {
        Dtx { identifier, conversation: 0, channel, expects_reply: false, kind: KIND_CALL, aux, payload }
    }

    /// The reply to this call: same identifier and channel code, the next conversation index.
    pub fn reply(&self, kind: u8, payload: Vec<u8>) -> Self {
        Dtx {
            identifier: self.identifier,
            conversation: self.conversation + 1,
            channel: self.channel,
            expects_reply: false,
            kind,
            aux: Vec::new(),
            payload,
        }
    }

    /// One fragment: every message the phone sends is small.
    pub fn encode(&self) -> Vec<u8> {
        let aux = encode_aux(&self.aux);
        let body_len = PAYLOAD_HEADER + aux.len() + self.payload.len();
        let mut out = Vec::with_capacity(HEADER + body_len);
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&(HEADER as u32).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        for w in [body_len as u32, self.identifier, self.conversation] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&self.channel.to_le_bytes());
        out.extend_from_slice(&u32::from(self.expects_reply).to_le_bytes());
        out.extend_from_slice(&[self.kind, 0, 0, 0]);
        for w in [aux.len() as u32, (aux.len() + self.payload.len()) as u32, 0] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&aux);
        out.extend_from_slice(&self.payload);
        out
    }

    /// One message, its fragments joined; `Ok(None)` at a clean end of stream.
    pub fn read_from(r: &mut impl Read) -> io::Result<Option<Self>> {
        let mut body = Vec::new();
        let mut first = true;
        let header = loop {
            let mut h = [0u8; HEADER];
            if first {
                if !crate::wire::read_exact_or_eof(r, &mut h)? {
                    return Ok(None);
                }
                first = false;
            } else {
                r.read_exact(&mut h)?;
            }
            if u32_at(&h, 0) != MAGIC {
                return Err(invalid(format!("DTX magic {:#x}", u32_at(&h, 0))));
            }
            // A longer header carries extensions, skipped.
            let header_len = u32_at(&h, 4) as usize;
            if !(HEADER..=4096).contains(&header_len) {
                return Err(invalid(format!("DTX header length {header_len}")));
            }
            io::copy(&mut r.by_ref().take((header_len - HEADER) as u64), &mut io::sink())?;
            let index = u16::from_le_bytes([h[8], h[9]]);
            let count = u16::from_le_bytes([h[10], h[11]]);
            let len = u32_at(&h, 12) as usize;
            if len > MAX_MESSAGE || body.len() + len > MAX_MESSAGE {
                return Err(invalid(format!("DTX message of {len} bytes")));
            }
            // The first of several fragments announces the whole size and carries no body.
            if count > 1 && index == 0 {
                continue;
            }
            let at = body.len();
            body.resize(at + len, 0);
            r.read_exact(&mut body[at..])?;
            if index + 1 >= count {
                break h;
            }
        };
        if body.len() < PAYLOAD_HEADER {
            return Err(invalid(format!("DTX body of {} bytes", body.len())));
        }
        let aux_len = u32_at(&body, 4) as usize;
        let total = u32_at(&body, 8) as usize;
        let end = PAYLOAD_HEADER.checked_add(total).filter(|&e| e <= body.len() && aux_len <= total);
        let end = end.ok_or_else(|| invalid(format!("DTX aux {aux_len} / total {total} in {} bytes", body.len())))?;
        let aux = decode_aux(&body[PAYLOAD_HEADER..PAYLOAD_HEADER + aux_len])?;
        Ok(Some(Dtx {
            identifier: u32_at(&header, 16),
            conversation: u32_at(&header, 20),
            channel: i32::from_le_bytes(header[24..28].try_into().unwrap()),
            expects_reply: u32_at(&header, 28) & 1 == 1,
            kind: body[0],
            aux,
            payload: body[PAYLOAD_HEADER + aux_len..end].to_vec(),
        }))
    }
}

fn primitive(v: &Aux, out: &mut Vec<u8>) {
    let (tag, bytes): (u32, Vec<u8>) = match v {
        Aux::String(s) => (T_STRING, [&(s.len() as u32).to_le_bytes()[..], s.as_bytes()].concat()),
        Aux::Buffer(b) => (T_BUFFER, [&(b.len() as u32).to_le_bytes()[..], b].concat()),
        Aux::U32(n) => (T_U32, n.to_le_bytes().to_vec()),
        Aux::I64(n) => (T_I64, n.to_le_bytes().to_vec()),
        Aux::Double(d) => (T_DOUBLE, d.to_le_bytes().to_vec()),
    };
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(&bytes);
}

/// The legacy aux: a 16-byte header (buffer size, 0, length of what follows, 0), then
/// each argument as a NULL key and its value.
fn encode_aux(values: &[Aux]) -> Vec<u8> {
    if values.is_empty() {
        return Vec::new();
    }
    let mut entries = Vec::new();
    for v in values {
        entries.extend_from_slice(&T_NULL.to_le_bytes());
        primitive(v, &mut entries);
    }
    let mut out = Vec::with_capacity(16 + entries.len());
    for w in [AUX_BUFFER_SIZE, 0, entries.len() as u32, 0] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.extend_from_slice(&entries);
    out
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or_else(|| invalid(format!("DTX aux cut at {} of {}", self.at, self.b.len())))?;
        let b: &'a [u8] = self.b;
        self.at = end;
        Ok(&b[end - n..end])
    }

    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }

    fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }

    fn done(&self) -> bool {
        self.at >= self.b.len()
    }

    /// One primitive, `None` for a NULL (the keys of positional arguments).
    fn primitive(&mut self) -> io::Result<Option<Aux>> {
        let tag = self.u32()?;
        Ok(Some(match tag & 0xff {
            0x01 => {
                let n = self.u32()? as usize;
                Aux::String(String::from_utf8_lossy(self.take(n)?).into_owned())
            }
            0x02 => {
                let n = self.u32()? as usize;
                Aux::Buffer(self.take(n)?.to_vec())
            }
            0x03 => Aux::U32(self.u32()?),
            0x06 => Aux::I64(self.u64()? as i64),
            0x09 => Aux::Double(f64::from_bits(self.u64()?)),
            0x0a => return Ok(None),
            _ => return Err(invalid(format!("DTX aux type {tag:#x}"))),
        }))
    }
}

/// The arguments of a call, in order: the legacy form (a 16-byte header, then NULL keys
/// and values) or a bare primitive dictionary (first byte 0xF0, as iOS 17's peers send).
pub fn decode_aux(b: &[u8]) -> io::Result<Vec<Aux>> {
    let mut values = Vec::new();
    if b.is_empty() {
        return Ok(values);
    }
    let mut c = Cursor { b, at: 0 };
    let legacy = u32::from(b[0]) != T_DICTIONARY;
    c.take(if legacy { 16 } else { 8 })?;
    if !legacy {
        let n = c.u64()? as usize;
        c = Cursor { b: c.take(n)?, at: 0 };
    }
    while !c.done() {
        if let Some(v) = c.primitive()? {
            values.push(v);
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_round_trips_with_its_lengths_and_arguments() {
        let m = Dtx {
            identifier: 7,
            conversation: 0,
            channel: 3,
            expects_reply: true,
            kind: KIND_CALL,
            aux: vec![Aux::U32(5), Aux::Buffer(b"xy".to_vec()), Aux::String("s".into()), Aux::I64(-2)],
            payload: b"selector".to_vec(),
        };
        let bytes = m.encode();
        assert_eq!(u32_at(&bytes, 0), MAGIC);
        assert_eq!(u32_at(&bytes, 12) as usize, bytes.len() - HEADER, "the body length");
        let aux_len = u32_at(&bytes, HEADER + 4) as usize;
        assert_eq!(u32_at(&bytes, HEADER + 8) as usize, aux_len + 8, "aux + payload");
        assert_eq!(u32_at(&bytes, HEADER + PAYLOAD_HEADER + 8) as usize, aux_len - 16, "the aux header's length");
        assert_eq!(Dtx::read_from(&mut bytes.as_slice()).unwrap(), Some(m.clone()));
        assert_eq!(Dtx::read_from(&mut [].as_slice()).unwrap(), None);
        assert!(Dtx::read_from(&mut &bytes[..40]).is_err(), "a cut message is an error");

        let r = m.reply(KIND_OK, Vec::new());
        assert_eq!((r.identifier, r.conversation, r.channel, r.expects_reply), (7, 1, 3, false));
        let back = Dtx::read_from(&mut r.encode().as_slice()).unwrap().unwrap();
        assert!(back.aux.is_empty() && back.payload.is_empty());
    }

    #[test]
    fn fragments_are_joined_and_a_primitive_dictionary_reads_as_positional_arguments() {
        let whole = Dtx::call(9, 1, b"0123456789".to_vec(), vec![Aux::U32(1)]).encode();
        let body = &whole[HEADER..];
        let fragment = |index: u16, len: usize| {
            let mut h = whole[..HEADER].to_vec();
            h[8..10].copy_from_slice(&index.to_le_bytes());
            h[10..12].copy_from_slice(&3u16.to_le_bytes());
            h[12..16].copy_from_slice(&(len as u32).to_le_bytes());
            h
        };
        let (a, b) = body.split_at(20);
        let stream = [fragment(0, body.len()), fragment(1, a.len()), a.to_vec(), fragment(2, b.len()), b.to_vec()];
        let m = Dtx::read_from(&mut stream.concat().as_slice()).unwrap().unwrap();
        assert_eq!((m.payload.as_slice(), m.aux.as_slice()), (&b"0123456789"[..], &[Aux::U32(1)][..]));

        let mut entries = Vec::new();
        for v in [Aux::U32(4), Aux::String("id".into())] {
            entries.extend_from_slice(&T_NULL.to_le_bytes());
            primitive(&v, &mut entries);
        }
        let dict = [&0x1f0u32.to_le_bytes()[..], &0u32.to_le_bytes(), &(entries.len() as u64).to_le_bytes(), &entries]
            .concat();
        assert_eq!(decode_aux(&dict).unwrap(), [Aux::U32(4), Aux::String("id".into())]);
        assert!(decode_aux(&dict[..dict.len() - 1]).is_err());
    }
}
