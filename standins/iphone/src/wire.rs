//! The two framings the phone side speaks. usbmuxd's socket: a 16-byte header of
//! little-endian u32s (length including the header, version 1 = plist, message 8 =
//! plist, tag) and an XML plist. Lockdownd and its services: a big-endian u32 length and
//! a plist (the host sends XML; replies here are XML too, as the captures are).

use std::io::{self, Read, Write};

pub const MUX_HEADER: usize = 16;
pub const MUX_VERSION_PLIST: u32 = 1;
pub const MUX_MESSAGE_PLIST: u32 = 8;
/// Frames larger than this are not a host talking usbmuxd or lockdown (libusbmuxd's own
/// limit is far lower); refuse them instead of allocating.
const MAX_FRAME: usize = 64 << 20;

#[derive(Debug, Clone, PartialEq)]
pub struct MuxFrame {
    pub version: u32,
    pub message: u32,
    pub tag: u32,
    pub body: Vec<u8>,
}

impl MuxFrame {
    pub fn plist(tag: u32, body: Vec<u8>) -> Self {
        MuxFrame { version: MUX_VERSION_PLIST, message: MUX_MESSAGE_PLIST, tag, body }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MUX_HEADER + self.body.len());
        for v in [(MUX_HEADER + self.body.len()) as u32, self.version, self.message, self.tag] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.body);
        out
    }

    /// `Ok(None)` at a clean end of stream (the host closed before a new frame).
    pub fn read_from(r: &mut impl Read) -> io::Result<Option<Self>> {
        let mut header = [0u8; MUX_HEADER];
        if !read_exact_or_eof(r, &mut header)? {
            return Ok(None);
        }
        let word = |i: usize| u32::from_le_bytes(header[i * 4..i * 4 + 4].try_into().unwrap());
        let len = word(0) as usize;
        if !(MUX_HEADER..=MAX_FRAME).contains(&len) {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("usbmux frame length {len}")));
        }
        let mut body = vec![0; len - MUX_HEADER];
        r.read_exact(&mut body)?;
        Ok(Some(MuxFrame { version: word(1), message: word(2), tag: word(3), body }))
    }
}

/// Replaces the tag of an encoded usbmux frame (a replayed capture answers this host's tag).
pub fn with_tag(frame: &[u8], tag: u32) -> Vec<u8> {
    let mut out = frame.to_vec();
    out[12..16].copy_from_slice(&tag.to_le_bytes());
    out
}

/// True when `buf` was filled, false when the stream ended before its first byte.
pub fn read_exact_or_eof(r: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

pub fn xml(value: &plist::Value) -> Vec<u8> {
    let mut out = Vec::new();
    value.to_writer_xml(&mut out).expect("a plist value serializes");
    out
}

pub fn parse(body: &[u8]) -> io::Result<plist::Dictionary> {
    plist::from_bytes::<plist::Dictionary>(body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// One lockdown/service frame; `Ok(None)` at a clean end of stream.
pub fn read_plist(r: &mut impl Read) -> io::Result<Option<plist::Dictionary>> {
    let mut len = [0u8; 4];
    if !read_exact_or_eof(r, &mut len)? {
        return Ok(None);
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("plist frame length {len}")));
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    parse(&body).map(Some)
}

pub fn plist_frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

pub fn write_plist(w: &mut impl Write, dict: plist::Dictionary) -> io::Result<()> {
    w.write_all(&plist_frame(&xml(&plist::Value::Dictionary(dict))))?;
    w.flush()
}

/// Builds a dictionary from `(key, value)` pairs, in order.
pub fn dict<const N: usize>(pairs: [(&str, plist::Value); N]) -> plist::Dictionary {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

pub fn string(d: &plist::Dictionary, key: &str) -> Option<String> {
    d.get(key).and_then(plist::Value::as_string).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mux_frame_round_trips_and_counts_its_header_in_the_length() {
        let frame = MuxFrame::plist(7, b"<plist/>".to_vec());
        let bytes = frame.encode();
        assert_eq!(&bytes[..4], &(16u32 + 8).to_le_bytes());
        assert_eq!(&bytes[4..12], &[1, 0, 0, 0, 8, 0, 0, 0]);
        assert_eq!(MuxFrame::read_from(&mut bytes.as_slice()).unwrap(), Some(frame));
        assert_eq!(MuxFrame::read_from(&mut [].as_slice()).unwrap(), None);
        assert!(MuxFrame::read_from(&mut &bytes[..20]).is_err(), "a cut frame is an error, not an end");
        assert!(MuxFrame::read_from(&mut [4u8, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0].as_slice()).is_err());
    }

    #[test]
    fn the_appium_capture_decodes_and_takes_a_new_tag() {
        let capture = include_bytes!("../../../tests/fixtures/devices/ios/usbmux_connect_result_appium.bin");
        let frame = MuxFrame::read_from(&mut capture.as_slice()).unwrap().unwrap();
        assert_eq!((frame.version, frame.message, frame.tag), (1, 8, 1));
        let body = parse(&frame.body).unwrap();
        assert_eq!(string(&body, "MessageType").as_deref(), Some("Result"));
        let retagged = with_tag(capture, 9);
        assert_eq!(MuxFrame::read_from(&mut retagged.as_slice()).unwrap().unwrap().tag, 9);
        assert_eq!(retagged[16..], capture[16..]);
    }

    #[test]
    fn a_lockdown_frame_is_a_big_endian_length_and_a_plist() {
        let mut out = Vec::new();
        write_plist(&mut out, dict([("Request", "QueryType".into())])).unwrap();
        assert_eq!(u32::from_be_bytes(out[..4].try_into().unwrap()) as usize, out.len() - 4);
        let back = read_plist(&mut out.as_slice()).unwrap().unwrap();
        assert_eq!(string(&back, "Request").as_deref(), Some("QueryType"));
        let capture = include_bytes!("../../../tests/fixtures/devices/ios/lockdown_querytype_appium.bin");
        let q = read_plist(&mut capture.as_slice()).unwrap().unwrap();
        assert_eq!(string(&q, "Type").as_deref(), Some("com.apple.mobile.lockdown"));
        assert_eq!(read_plist(&mut [].as_slice()).unwrap(), None);
    }
}
