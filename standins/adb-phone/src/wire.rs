//! The adb transport's messages (AOSP adb/protocol.txt): a 24-byte little-endian header
//! (command, arg0, arg1, data length, data checksum, magic = !command) and a payload.

use std::io::{self, Read, Write};

pub const A_CNXN: u32 = 0x4e58_4e43;
pub const A_AUTH: u32 = 0x4854_5541;
pub const A_OPEN: u32 = 0x4e45_504f;
pub const A_OKAY: u32 = 0x5941_4b4f;
pub const A_CLSE: u32 = 0x4553_4c43;
pub const A_WRTE: u32 = 0x4554_5257;

/// The protocol version that lets both sides skip the payload checksum; adb 29 sends it.
pub const A_VERSION: u32 = 0x0100_0001;
/// What this phone accepts in one WRTE (adbd's MAX_PAYLOAD before Android 9 was 256 KiB too).
pub const MAX_PAYLOAD: u32 = 256 * 1024;

pub const AUTH_TOKEN: u32 = 1;
pub const AUTH_SIGNATURE: u32 = 2;
pub const AUTH_RSAPUBLICKEY: u32 = 3;

/// Guards against a corrupt or hostile header asking for a huge allocation.
const LARGEST_ACCEPTED: u32 = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub command: u32,
    pub arg0: u32,
    pub arg1: u32,
    pub data: Vec<u8>,
}

impl Message {
    pub fn new(command: u32, arg0: u32, arg1: u32, data: impl Into<Vec<u8>>) -> Message {
        Message { command, arg0, arg1, data: data.into() }
    }

    /// Reads one message; `Ok(None)` when the host closed the connection between messages.
    pub fn read_from(r: &mut impl Read) -> io::Result<Option<Message>> {
        let mut header = [0u8; 24];
        match r.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let word = |i: usize| u32::from_le_bytes(header[i * 4..i * 4 + 4].try_into().unwrap());
        let (command, arg0, arg1, len, magic) = (word(0), word(1), word(2), word(3), word(5));
        if magic != !command {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("bad magic {magic:#x} for {command:#x}")));
        }
        if len > LARGEST_ACCEPTED {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("payload of {len} bytes")));
        }
        let mut data = vec![0u8; len as usize];
        r.read_exact(&mut data)?;
        // The checksum is not checked: from A_VERSION on the host may send 0.
        Ok(Some(Message { command, arg0, arg1, data }))
    }

    pub fn encode(&self) -> Vec<u8> {
        // Old hosts check the sum of the payload bytes; sending it costs nothing.
        let checksum = self.data.iter().fold(0u32, |sum, b| sum.wrapping_add(u32::from(*b)));
        let mut out = Vec::with_capacity(24 + self.data.len());
        for word in [self.command, self.arg0, self.arg1, self.data.len() as u32, checksum, !self.command] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&self.data);
        out
    }

    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.encode())?;
        w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_survives_encoding() {
        let m = Message::new(A_WRTE, 7, 9, b"hello".to_vec());
        let bytes = m.encode();
        assert_eq!(bytes.len(), 29);
        assert_eq!(&bytes[0..4], b"WRTE");
        assert_eq!(u32::from_le_bytes(bytes[16..20].try_into().unwrap()), 532);
        assert_eq!(Message::read_from(&mut &bytes[..]).unwrap(), Some(m));
    }

    #[test]
    fn a_bad_magic_is_refused() {
        let mut bytes = Message::new(A_OKAY, 1, 2, Vec::new()).encode();
        bytes[20] ^= 1;
        assert!(Message::read_from(&mut &bytes[..]).is_err());
    }
}
