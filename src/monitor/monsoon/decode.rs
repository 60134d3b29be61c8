//! Sample packets → the main channel's current (mA) and voltage (V), as Monsoon's Python
//! API decodes them (`monsoon` 0.1.88: HVPM.py/LVPM.py `swizzlePacket`, sampleEngine.py
//! `__processPacket`, `__vectorProcess`, calibrationData.py), so lab's figures are the
//! ones Monsoon's own software would give on the same bytes (tests/monsoon_decode_check.py
//! checks it on ≥ 10 000 packets).
//!
//! A packet is 64 bytes: a little-endian u16 count of samples the instrument dropped so
//! far, a flags byte, the number of samples in it (up to 3), then 18 bytes a sample:
//! eight big-endian 16-bit readings (main coarse, main fine, USB coarse, USB fine, aux
//! coarse, aux fine, main voltage, USB voltage; the currents signed on an LVPM), a byte
//! the API does not read and the sample's type in bits 4–5 of its last byte: a
//! measurement, a zero-calibration or a reference-calibration reading (or invalid).
//! The last 5 zero and reference readings of each range (ignoring zeros) set the range's
//! zero offset and slope; a reading below the fine threshold is in the fine range.

use super::Calibration;
use super::calibration::ADC_RATIO;
use crate::collect::monitor::Gap;
use crate::config::MonsoonModel;

pub const PACKET_LEN: usize = 64;
pub const SAMPLES_PER_PACKET: usize = 3;
const HEADER_LEN: usize = 4;
const SAMPLE_LEN: usize = 18;
/// Samples (of every type) the API decodes at once once sampling (`bulkProcessRate`):
/// each batch with the calibration as it stands after the batch's calibration readings.
const BATCH_SAMPLES: usize = 128;
/// Calibration readings averaged (`calsToKeep`).
const CALS_TO_KEEP: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleKind {
    Measurement,
    ZeroCal,
    Invalid,
    RefCal,
}

impl SampleKind {
    fn of(byte: u8) -> SampleKind {
        match byte & 0x30 {
            0x00 => SampleKind::Measurement,
            0x10 => SampleKind::ZeroCal,
            0x20 => SampleKind::Invalid,
            _ => SampleKind::RefCal,
        }
    }
}

/// One sample's readings: `currents` in the order main coarse, main fine, USB coarse,
/// USB fine, aux coarse, aux fine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawSample {
    pub currents: [i32; 6],
    pub main_voltage: u16,
    pub usb_voltage: u16,
    pub kind: SampleKind,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Packet {
    /// Samples dropped since sampling started, as the instrument counts them (wraps).
    pub dropped: u16,
    pub flags: u8,
    pub samples: Vec<RawSample>,
}

impl Packet {
    /// Reads a packet; a short one is read as if padded with zeros, as the API pads it.
    pub fn parse(bytes: &[u8], model: MonsoonModel) -> Packet {
        let mut b = [0u8; PACKET_LEN];
        let n = bytes.len().min(PACKET_LEN);
        b[..n].copy_from_slice(&bytes[..n]);
        // More than 3 cannot fit; the API would fail on it, lab reads the 3 there are.
        let count = usize::from(b[3]).min(SAMPLES_PER_PACKET);
        let samples = (0..count)
            .map(|i| {
                let s = &b[HEADER_LEN + i * SAMPLE_LEN..HEADER_LEN + (i + 1) * SAMPLE_LEN];
                let word = |k: usize| u16::from_be_bytes([s[2 * k], s[2 * k + 1]]);
                let current = |k: usize| match model {
                    MonsoonModel::Hvpm => i32::from(word(k)),
                    MonsoonModel::Lvpm => i32::from(word(k) as i16),
                };
                RawSample {
                    currents: [current(0), current(1), current(2), current(3), current(4), current(5)],
                    main_voltage: word(6),
                    usb_voltage: word(7),
                    kind: SampleKind::of(s[17]),
                }
            })
            .collect();
        Packet { dropped: u16::from_le_bytes([b[0], b[1]]), flags: b[2], samples }
    }
}

/// The last `CALS_TO_KEEP` non-zero readings of one range (calibrationData.py).
#[derive(Debug, Clone, Copy, Default)]
struct Rolling {
    values: [i32; CALS_TO_KEEP],
    next: usize,
    full: bool,
}

impl Rolling {
    fn add(&mut self, value: i32) {
        if value == 0 {
            return;
        }
        self.values[self.next] = value;
        self.next += 1;
        if self.next >= CALS_TO_KEEP {
            self.full = true;
            self.next = 0;
        }
    }

    /// Their mean, as the API takes it: the integer sum divided once.
    fn mean(&self) -> f64 {
        self.values.iter().map(|&v| i64::from(v)).sum::<i64>() as f64 / CALS_TO_KEEP as f64
    }
}

/// What a sampling run decoded: the main channel from the first calibrated sample on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decoded {
    /// The first sample's place among all the measurement samples the instrument took
    /// (those before calibration and those it dropped included): its time × 5 kHz.
    pub t0_position: u64,
    pub main_ma: Vec<f64>,
    pub main_v: Vec<f64>,
    pub gaps: Vec<Gap>,
    pub packets: u64,
}

/// Decodes packets in the order they came, keeping the API's calibration timing: until
/// every range has its 5 zero and 5 reference readings, packets only calibrate (their
/// measurements, up to the packet that completes the calibration, are not decoded, as
/// the API's `__startupCheck` discards them); after that, batches of ≥ 128 samples.
#[derive(Debug, Clone)]
pub struct Decoder {
    calibration: Calibration,
    /// Per range (the `currents` order) its zero readings at 2·i, reference at 2·i + 1.
    windows: [Rolling; 12],
    running: bool,
    batch: Vec<RawSample>,
    /// Measurement samples in `batch`.
    queued: usize,
    last_dropped: Option<u16>,
    position: u64,
    out: Decoded,
}

impl Decoder {
    pub fn new(calibration: Calibration) -> Decoder {
        Decoder {
            calibration,
            windows: [Rolling::default(); 12],
            running: false,
            batch: Vec::with_capacity(BATCH_SAMPLES + SAMPLES_PER_PACKET),
            queued: 0,
            last_dropped: None,
            position: 0,
            out: Decoded::default(),
        }
    }

    /// Measurement samples the instrument has taken so far (dropped ones included).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Every range has its calibration readings: samples are being decoded.
    pub fn calibrated(&self) -> bool {
        self.running
    }

    /// Measurement samples decoded or queued to be: where the next one will be in the trace.
    pub fn next_index(&self) -> usize {
        self.out.main_ma.len() + self.queued
    }

    pub fn push(&mut self, bytes: &[u8]) {
        let packet = Packet::parse(bytes, self.calibration.model);
        self.out.packets += 1;
        // The first packet's count is where this run's counting starts.
        let missing = u64::from(packet.dropped.wrapping_sub(self.last_dropped.unwrap_or(packet.dropped)));
        self.last_dropped = Some(packet.dropped);
        if missing > 0 {
            if self.running {
                self.out.gaps.push(Gap { at: self.next_index(), missing });
            }
            self.position += missing;
        }
        let measurements = packet.samples.iter().filter(|s| s.kind == SampleKind::Measurement).count();
        self.position += measurements as u64;
        if packet.samples.is_empty() {
            return;
        }
        self.queued += measurements;
        self.batch.extend(packet.samples);
        if !self.running {
            self.calibrate();
            self.batch.clear();
            self.queued = 0;
            if self.windows.iter().all(|w| w.full) {
                self.running = true;
                self.out.t0_position = self.position;
            }
        } else if self.batch.len() >= BATCH_SAMPLES {
            self.flush();
        }
    }

    /// Decodes what is queued (where the API would wait for the batch to fill) and returns
    /// everything decoded.
    pub fn finish(mut self) -> Decoded {
        if self.running {
            self.flush();
        }
        self.out
    }

    /// Adds the batch's calibration readings to the windows.
    fn calibrate(&mut self) {
        for s in &self.batch {
            let offset = match s.kind {
                SampleKind::ZeroCal => 0,
                SampleKind::RefCal => 1,
                SampleKind::Measurement | SampleKind::Invalid => continue,
            };
            for (range, &value) in s.currents.iter().enumerate() {
                self.windows[2 * range + offset].add(value);
            }
        }
    }

    fn flush(&mut self) {
        self.calibrate();
        let cal = &self.calibration;
        // Main coarse is range 0, main fine range 1 (sampleEngine's indices).
        let line = |range: usize, eeprom_zero: f64, scale: f64| {
            let zero = eeprom_zero + self.windows[2 * range].mean();
            let reference = self.windows[2 * range + 1].mean();
            let slope = if reference - zero != 0.0 { scale / (reference - zero) } else { 0.0 };
            (zero, slope)
        };
        let (coarse_zero, coarse_slope) = line(0, cal.main_coarse_zero_offset, cal.main_coarse_scale);
        let (fine_zero, fine_slope) = line(1, cal.main_fine_zero_offset, cal.main_fine_scale);
        let (threshold, volts_scale) = (cal.fine_threshold(), cal.voltage_scale());
        for s in self.batch.iter().filter(|s| s.kind == SampleKind::Measurement) {
            let (coarse, fine) = (f64::from(s.currents[0]), f64::from(s.currents[1]));
            let ma = if fine < threshold {
                (fine - fine_zero) * fine_slope / 1000.0
            } else {
                (coarse - coarse_zero) * coarse_slope
            };
            self.out.main_ma.push(ma);
            self.out.main_v.push(f64::from(s.main_voltage) * ADC_RATIO * volts_scale);
        }
        self.batch.clear();
        self.queued = 0;
    }
}
