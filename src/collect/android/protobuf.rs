//! A minimal protobuf wire-format reader (varint, 64-bit, length-delimited, 32-bit), enough
//! to walk a Perfetto trace without generated code or protoc. Every error names the byte
//! offset in the whole input, so a nested message is read with the offset it starts at.

use crate::collect::parse_error::ParseError;

/// One field's payload, by wire type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireValue<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// A field of a message: its number, payload, and its offset in the whole input (of the
/// payload for length-delimited fields, so a nested message's offsets add up; else of the tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireField<'a> {
    pub number: u32,
    pub value: WireValue<'a>,
    pub offset: u64,
}

fn err(offset: u64, message: impl Into<String>) -> ParseError {
    ParseError::Byte { offset, message: message.into() }
}

impl<'a> WireField<'a> {
    fn wrong(&self, want: &str) -> ParseError {
        let got = match self.value {
            WireValue::Varint(_) => "a varint",
            WireValue::Fixed64(_) => "a 64-bit value",
            WireValue::Bytes(_) => "a length-delimited value",
            WireValue::Fixed32(_) => "a 32-bit value",
        };
        err(self.offset, format!("field {}: expected {want}, found {got}", self.number))
    }

    pub fn varint(&self) -> Result<u64, ParseError> {
        match self.value {
            WireValue::Varint(v) => Ok(v),
            _ => Err(self.wrong("a varint")),
        }
    }

    /// An `int64`: a varint read as two's complement.
    pub fn int64(&self) -> Result<i64, ParseError> {
        self.varint().map(|v| v as i64)
    }

    pub fn uint32(&self) -> Result<u32, ParseError> {
        let v = self.varint()?;
        u32::try_from(v).map_err(|_| err(self.offset, format!("field {}: {v} does not fit a uint32", self.number)))
    }

    pub fn float(&self) -> Result<f32, ParseError> {
        match self.value {
            WireValue::Fixed32(v) => Ok(f32::from_bits(v)),
            _ => Err(self.wrong("a 32-bit float")),
        }
    }

    pub fn bytes(&self) -> Result<&'a [u8], ParseError> {
        match self.value {
            WireValue::Bytes(b) => Ok(b),
            _ => Err(self.wrong("a length-delimited value")),
        }
    }

    pub fn string(&self) -> Result<String, ParseError> {
        let b = self.bytes()?;
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|e| err(self.offset + e.valid_up_to() as u64, format!("field {}: not UTF-8", self.number)))
    }

    /// The payload as a nested message.
    pub fn message(&self) -> Result<WireReader<'a>, ParseError> {
        Ok(WireReader::at(self.bytes()?, self.offset))
    }
}

/// Iterates over the fields of one message.
#[derive(Debug, Clone)]
pub struct WireReader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
}

impl<'a> WireReader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        WireReader::at(buf, 0)
    }

    /// A reader of `buf`, which starts at byte `base` of the whole input.
    pub fn at(buf: &'a [u8], base: u64) -> Self {
        WireReader { buf, pos: 0, base }
    }

    fn here(&self) -> u64 {
        self.base + self.pos as u64
    }

    fn varint(&mut self) -> Result<u64, ParseError> {
        let start = self.here();
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(err(self.here(), "the input ends inside a varint"));
            };
            self.pos += 1;
            // The tenth byte may only carry the 64th bit.
            if i == 9 && b > 1 {
                return Err(err(start, "a varint longer than 64 bits"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(err(start, "a varint longer than 10 bytes"))
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ParseError> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(err(self.here(), format!("the input ends inside {what}: {n} bytes needed, {left} left")));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn field(&mut self) -> Result<WireField<'a>, ParseError> {
        let tag_at = self.here();
        let tag = self.varint()?;
        let number = u32::try_from(tag >> 3)
            .ok()
            .filter(|n| (1..=0x1fff_ffff).contains(n))
            .ok_or_else(|| err(tag_at, format!("field number {} is out of range", tag >> 3)))?;
        let value = match tag & 7 {
            0 => WireValue::Varint(self.varint()?),
            1 => WireValue::Fixed64(u64::from_le_bytes(self.take(8, "a 64-bit value")?.try_into().unwrap_or([0; 8]))),
            2 => {
                let len_at = self.here();
                let len = self.varint()?;
                let len = usize::try_from(len).map_err(|_| err(len_at, format!("length {len} is too large")))?;
                let offset = self.here();
                return Ok(WireField {
                    number,
                    value: WireValue::Bytes(self.take(len, "a length-delimited value")?),
                    offset,
                });
            }
            5 => WireValue::Fixed32(u32::from_le_bytes(self.take(4, "a 32-bit value")?.try_into().unwrap_or([0; 4]))),
            w => {
                return Err(err(tag_at, format!("field {number}: wire type {w} is not supported (groups or garbage)")));
            }
        };
        Ok(WireField { number, value, offset: tag_at })
    }
}

impl<'a> Iterator for WireReader<'a> {
    type Item = Result<WireField<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let r = self.field();
        if r.is_err() {
            // Stop after the first error: what follows a bad field cannot be framed.
            self.pos = self.buf.len();
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(b: &[u8]) -> Result<Vec<WireField<'_>>, ParseError> {
        WireReader::new(b).collect()
    }

    #[test]
    fn reads_each_wire_type() {
        // 1: varint 300; 2: fixed64 1; 3: bytes "hi"; 4: fixed32 1.5f
        let mut b = vec![0x08, 0xac, 0x02, 0x11];
        b.extend_from_slice(&1u64.to_le_bytes());
        b.extend_from_slice(&[0x1a, 0x02, b'h', b'i', 0x25]);
        b.extend_from_slice(&1.5f32.to_bits().to_le_bytes());
        let f = fields(&b).unwrap();
        assert_eq!(f.len(), 4);
        assert_eq!((f[0].number, f[0].varint().unwrap()), (1, 300));
        assert_eq!(f[1].value, WireValue::Fixed64(1));
        assert_eq!((f[2].string().unwrap().as_str(), f[2].offset), ("hi", 14));
        assert_eq!(f[3].float().unwrap(), 1.5);
    }

    #[test]
    fn negative_int64_is_ten_bytes_of_twos_complement() {
        let b = [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(fields(&b).unwrap()[0].int64().unwrap(), -1);
    }

    #[test]
    fn nested_messages_report_absolute_offsets() {
        // field 1 { field 2: bytes of length 5 with only 1 byte present }
        let b = [0x0a, 0x03, 0x12, 0x05, 0x00];
        let outer = fields(&b).unwrap();
        let inner: Result<Vec<_>, _> = outer[0].message().unwrap().collect();
        assert_eq!(
            inner.unwrap_err(),
            ParseError::Byte {
                offset: 4,
                message: "the input ends inside a length-delimited value: 5 bytes needed, 1 left".into()
            }
        );
    }

    #[test]
    fn truncation_and_garbage_are_errors_at_their_byte() {
        let cases: &[(&[u8], u64)] = &[
            (&[0x08], 1),                                                             // no value
            (&[0x08, 0x80], 2),                                                       // varint cut
            (&[0x09, 0, 0], 1),                                                       // fixed64 cut
            (&[0x0d, 0], 1),                                                          // fixed32 cut
            (&[0x0b], 0),                                                             // group start
            (&[0x00, 0x00], 0),                                                       // field 0
            (&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], 1), // > 64 bits
        ];
        for (b, at) in cases {
            let e = fields(b).unwrap_err();
            assert!(matches!(e, ParseError::Byte { offset, .. } if offset == *at), "{b:02x?}: {e}");
        }
    }

    #[test]
    fn wrong_wire_type_names_the_field() {
        let f = fields(&[0x10, 0x01]).unwrap();
        assert_eq!(
            f[0].bytes().unwrap_err().to_string(),
            "byte 0: field 2: expected a length-delimited value, found a varint"
        );
        assert!(fields(&[0x08, 0xff, 0xff, 0xff, 0xff, 0x1f]).unwrap()[0].uint32().is_err());
    }
}
