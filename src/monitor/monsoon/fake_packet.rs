//! `ApiPacket`: the fake Monsoon's sample packets, encoded from Monsoon's Python API
//! (`monsoon` 0.1.88 on PyPI: HVPM.py / LVPM.py `swizzlePacket`, sampleEngine.py
//! `__processPacket`, Operations.py `SampleType`) and from nothing of lab's. `decode.rs`
//! reads packets and this writes them; they share no code and no constant, so a slip in
//! either shows in every test that decodes the fake's stream, not only in the cross-check
//! with the API (docs/platforms/monitors.md, "How it was verified").
//!
//! The API reads a 64-byte packet by swapping each pair of bytes from byte 4 on
//! (`swizzlePacket`) and unpacking the first 58 with the native (little-endian) struct
//! format `HBB` + `HHHHHHHHBB` × 3 (`hhhhhhHHBB` on an LVPM, whose currents are signed):
//! the dropped count, flags, the number of samples, then per sample six currents, two
//! voltages, the sample's type (`sample[8] & 0x30`) and a byte it never reads. So this
//! lays those fields out little-endian as the format says and swaps the pairs back: the
//! swap is its own inverse.

/// The sample types (Operations.py `SampleType`), in the byte after a sample's voltages.
pub const MEASUREMENT: u8 = 0x00;
pub const ZERO_CAL: u8 = 0x10;
pub const REF_CAL: u8 = 0x30;

/// A packet's length on the bulk endpoint (`BulkRead`: `read(0x81, 64)`).
const LEN: usize = 64;
/// Where the swizzled byte pairs start: after the `HBB` header (u16, u8, u8).
const SWIZZLED_FROM: usize = 4;

/// One sample as `swizzlePacket` unpacks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiSample {
    /// Main coarse, main fine, USB coarse, USB fine, aux coarse, aux fine (sampleEngine's
    /// indices 0–5): `H`, 0 to 65 535, on an HVPM; `h`, −32 768 to 32 767, on an LVPM.
    pub currents: [i32; 6],
    pub main_voltage: u16,
    pub usb_voltage: u16,
    /// `MEASUREMENT`, `ZERO_CAL` or `REF_CAL`.
    pub sample_type: u8,
}

/// One packet's fields, as `swizzlePacket` returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiPacket {
    /// Samples dropped since the start request (the instrument's count, wrapping).
    pub dropped: u16,
    pub flags: u8,
    /// Up to 3 (the format has room for 3).
    pub samples: Vec<ApiSample>,
}

impl ApiPacket {
    /// The 64 bytes the instrument sends for these fields.
    pub fn bytes(&self) -> [u8; LEN] {
        assert!(self.samples.len() <= 3, "a packet holds at most 3 samples, not {}", self.samples.len());
        // The unpacked image: the fields in struct-format order, little-endian.
        let mut image = [0u8; LEN];
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            image[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put(&self.dropped.to_le_bytes());
        put(&[self.flags, self.samples.len() as u8]);
        for s in &self.samples {
            for c in s.currents {
                put(&word(c).to_le_bytes());
            }
            put(&s.main_voltage.to_le_bytes());
            put(&s.usb_voltage.to_le_bytes());
            put(&[s.sample_type, 0]);
        }
        // Back to the wire's order: each pair of bytes after the header swapped.
        for pair in image[SWIZZLED_FROM..].chunks_exact_mut(2) {
            pair.swap(0, 1);
        }
        image
    }
}

/// A current reading's 16 bits, as `h` (signed) or `H` (unsigned) packs it.
fn word(reading: i32) -> u16 {
    match (i16::try_from(reading), u16::try_from(reading)) {
        (_, Ok(unsigned)) => unsigned,
        (Ok(signed), _) => u16::from_ne_bytes(signed.to_ne_bytes()),
        _ => panic!("the fake made a reading of {reading}, which no 16-bit field holds"),
    }
}
