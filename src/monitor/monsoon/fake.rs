//! `FakeMonsoon`: a scripted Monsoon behind `UsbLink`, for lab's tests and any crate that
//! drives a `Monsoon` session without the instrument. It answers the control requests as
//! the instrument does (its EEPROM: calibration, versions, serial, limits; the sampling
//! bit of the start status), and once started streams sample packets of a known current
//! draw at the set voltage, with zero- and reference-calibration packets interleaved:
//! enough at the start to calibrate, then one of each every calibration period the start
//! request gave. It can drop packets (counting them in the header as the instrument
//! does), leave USB after N packets, and records every control request and passthrough
//! change for tests to assert on.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::calibration::ADC_RATIO;
use super::decode::{Packet, RawSample, SampleKind};
use super::protocol::{self, op};
use super::{Setup, UsbError, UsbLink};
use crate::config::MonsoonModel;

/// Measurement samples a second.
const RATE_HZ: f64 = 5000.0;

/// The current the fake's device draws, mA, at `t` s of the monitor's clock.
#[derive(Clone)]
pub enum Draw {
    Constant {
        ma: f64,
    },
    /// `base_ma`, plus `pulse_ma` for `width_s` at the start of every `every_s`.
    Pulse {
        base_ma: f64,
        pulse_ma: f64,
        every_s: f64,
        width_s: f64,
    },
    Custom(Arc<dyn Fn(f64) -> f64 + Send + Sync>),
}

impl Draw {
    pub fn ma_at(&self, t: f64) -> f64 {
        match self {
            Draw::Constant { ma } => *ma,
            Draw::Pulse { base_ma, pulse_ma, every_s, width_s } => {
                base_ma + if t.rem_euclid(*every_s) < *width_s { *pulse_ma } else { 0.0 }
            }
            Draw::Custom(f) => f(t),
        }
    }
}

#[derive(Clone)]
pub struct FakeConfig {
    pub model: MonsoonModel,
    /// What the EEPROM's serial number reads.
    pub serial: u16,
    pub firmware: u16,
    pub draw: Draw,
    /// Drop every Nth measurement packet (its samples added to the header's dropped count).
    pub drop_every: Option<u64>,
    /// Leave USB after this many bulk packets: every later request fails as disconnected.
    pub disconnect_after: Option<u64>,
    /// Deliver packets in real time (5000 measurement samples a second from the start
    /// request), or as fast as they are read.
    pub paced: bool,
    /// dacCalLow, dacCalHigh (HVPM.py refuses to set a voltage outside 0xD000–0xF000 and
    /// 0xC000–0xD000).
    pub dac_cal: (u16, u16),
    /// Seeds the calibration readings' noise.
    pub seed: u64,
}

impl FakeConfig {
    pub fn new(model: MonsoonModel, draw: Draw) -> FakeConfig {
        FakeConfig {
            model,
            serial: 20001,
            firmware: 32,
            draw,
            drop_every: None,
            disconnect_after: None,
            paced: true,
            dac_cal: (0xE000, 0xC800),
            seed: 1,
        }
    }
}

/// The calibration readings the fake's ranges give, before their noise (± 3 counts), in
/// `RawSample::currents` order: zero, then reference.
pub const ZERO_READINGS: [i32; 6] = [110, 95, 120, 130, 140, 150];
pub const REF_READINGS: [i32; 6] = [20110, 20095, 18000, 18100, 15000, 15500];

/// One control request the fake got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlCall {
    pub setup: Setup,
    /// OUT: the data sent; IN: the length asked.
    pub data: Vec<u8>,
}

#[derive(Debug, Default)]
struct Shared {
    registers: BTreeMap<u8, u32>,
    controls: Vec<ControlCall>,
    passthrough: Vec<u8>,
    sampling: bool,
    starts: u32,
    packets: u64,
    dropped_packets: u64,
    disconnected: bool,
}

/// What the fake got, readable while the session owns the fake.
#[derive(Clone)]
pub struct FakeLog(Arc<Mutex<Shared>>);

impl FakeLog {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn controls(&self) -> Vec<ControlCall> {
        self.lock().controls.clone()
    }

    /// Every passthrough mode set, in order (0 off, 1 on, 2 auto).
    pub fn passthrough(&self) -> Vec<u8> {
        self.lock().passthrough.clone()
    }

    /// The set output voltage.
    pub fn voltage_v(&self) -> f64 {
        f64::from(self.register(op::MAIN_VOLTAGE)) / protocol::FLOAT_TO_INT
    }

    pub fn register(&self, opcode: u8) -> u32 {
        self.lock().registers.get(&opcode).copied().unwrap_or(0)
    }

    /// The whole register map (the EEPROM and the settings), opcode → value.
    pub fn registers(&self) -> BTreeMap<u8, u32> {
        self.lock().registers.clone()
    }

    pub fn sampling(&self) -> bool {
        self.lock().sampling
    }

    pub fn starts(&self) -> u32 {
        self.lock().starts
    }

    /// Bulk packets delivered, and measurement packets dropped.
    pub fn packets(&self) -> (u64, u64) {
        let s = self.lock();
        (s.packets, s.dropped_packets)
    }
}

pub struct FakeMonsoon {
    config: FakeConfig,
    shared: Arc<Mutex<Shared>>,
    /// The next measurement sample's slot on the monitor's clock (dropped ones included).
    slot: u64,
    measurement_packets: u64,
    dropped: u16,
    next_cal_slot: u64,
    cal_every_slots: u64,
    first_burst: bool,
    started: Instant,
    queue: VecDeque<([u8; 64], u64)>,
    rng: u64,
}

impl FakeMonsoon {
    pub fn new(config: FakeConfig) -> FakeMonsoon {
        let mut registers = BTreeMap::new();
        let hv = config.model == MonsoonModel::Hvpm;
        let model = if hv { protocol::MODEL_HVPM } else { protocol::MODEL_LVPM };
        registers.extend([
            (op::HARDWARE_MODEL, model as u32),
            (op::FIRMWARE_VERSION, u32::from(config.firmware)),
            (op::PROTOCOL_VERSION, 24),
            (op::SERIAL_NUMBER, u32::from(config.serial)),
            (op::USB_PASSTHROUGH, 2),
            (op::POWERUP_TIME, 100),
            (op::DAC_CAL_LOW, u32::from(config.dac_cal.0)),
            (op::DAC_CAL_HIGH, u32::from(config.dac_cal.1)),
            // HVPM.py's default scales and offsets (`setDefaultScaleValues`).
            (op::MAIN_FINE_SCALE, 36500),
            (op::MAIN_COARSE_SCALE, 6400),
            (op::USB_FINE_SCALE, 14000),
            (op::USB_COARSE_SCALE, 600),
            (op::AUX_FINE_SCALE, 3100),
            (op::AUX_COARSE_SCALE, 250),
            (op::MAIN_FINE_ZERO_OFFSET, 15),
            // A negative one, so its sign is read: -7 as the EEPROM holds it.
            (op::MAIN_COARSE_ZERO_OFFSET, u32::from((-7i16) as u16)),
            (op::USB_FINE_ZERO_OFFSET, 0),
            (op::USB_COARSE_ZERO_OFFSET, 0),
            // LVPM: shunt resistor offsets, 0.1 mΩ each.
            (op::MAIN_FINE_RESISTOR_OFFSET, 3),
            (op::MAIN_COARSE_RESISTOR_OFFSET, 251),
            (op::USB_FINE_RESISTOR_OFFSET, 0),
            (op::USB_COARSE_RESISTOR_OFFSET, 0),
            (op::AUX_FINE_RESISTOR_OFFSET, 0),
            (op::AUX_COARSE_RESISTOR_OFFSET, 0),
        ]);
        let seed = config.seed;
        FakeMonsoon {
            config,
            shared: Arc::new(Mutex::new(Shared { registers, ..Shared::default() })),
            slot: 0,
            measurement_packets: 0,
            dropped: 0,
            next_cal_slot: 0,
            cal_every_slots: 6250,
            first_burst: true,
            started: Instant::now(),
            queue: VecDeque::new(),
            rng: seed.max(1),
        }
    }

    pub fn log(&self) -> FakeLog {
        FakeLog(self.shared.clone())
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The main channel's zero offset and slope (mA per count) of `range` (0 coarse,
    /// 1 fine) as the decoder will find them from the noise-free readings.
    fn line(&self, range: usize) -> (f64, f64) {
        let s = self.lock();
        let reg = |o: u8| s.registers.get(&o).copied().unwrap_or(0);
        let cal = match self.config.model {
            MonsoonModel::Hvpm => (
                f64::from(reg(op::MAIN_COARSE_SCALE)),
                f64::from(reg(op::MAIN_FINE_SCALE)),
                f64::from(reg(op::MAIN_COARSE_ZERO_OFFSET) as u16 as i16),
                f64::from(reg(op::MAIN_FINE_ZERO_OFFSET) as u16 as i16),
            ),
            MonsoonModel::Lvpm => {
                let c = super::Calibration::lvpm(
                    f64::from(reg(op::MAIN_FINE_RESISTOR_OFFSET)),
                    f64::from(reg(op::MAIN_COARSE_RESISTOR_OFFSET)),
                );
                (c.main_coarse_scale, c.main_fine_scale, 0.0, 0.0)
            }
        };
        let (scale, eeprom_zero) = if range == 0 { (cal.0, cal.2) } else { (cal.1, cal.3) };
        let zero = eeprom_zero + f64::from(ZERO_READINGS[range]);
        (zero, scale / (f64::from(REF_READINGS[range]) - zero))
    }

    fn noise(&mut self) -> i32 {
        // xorshift64: deterministic, no dependency.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % 7) as i32 - 3
    }

    fn cal_packet(&mut self, kind: SampleKind) -> [u8; 64] {
        let base = if kind == SampleKind::ZeroCal { ZERO_READINGS } else { REF_READINGS };
        let samples = (0..3)
            .map(|_| RawSample { currents: base.map(|v| v + self.noise()), main_voltage: 0, usb_voltage: 0, kind })
            .collect();
        Packet { dropped: self.dropped, flags: 0, samples }.to_bytes()
    }

    fn measurement(&self, t: f64, volts_raw: u16, lines: [(f64, f64); 2]) -> RawSample {
        let ma = self.config.draw.ma_at(t);
        let (lo, hi) = match self.config.model {
            MonsoonModel::Hvpm => (0.0, 65535.0),
            MonsoonModel::Lvpm => (-32768.0, 32767.0),
        };
        let [(coarse_zero, coarse_slope), (fine_zero, fine_slope)] = lines;
        let coarse = (coarse_zero + ma / coarse_slope).round().clamp(lo, hi) as i32;
        // Past its range the fine reading saturates, and the decoder takes the coarse one.
        let fine = (fine_zero + ma * 1000.0 / fine_slope).round().clamp(lo, hi) as i32;
        RawSample {
            currents: [coarse, fine, 100, 100, 100, 100],
            main_voltage: volts_raw,
            usb_voltage: 0,
            kind: SampleKind::Measurement,
        }
    }

    /// Queues the next packets: a calibration burst when one is due, else one measurement
    /// packet (or, every `drop_every`, the count of one that was dropped).
    fn generate(&mut self) {
        if self.slot >= self.next_cal_slot {
            // Enough at the start for the 5 readings of each a decoder needs, then one
            // packet of each per period.
            let bursts = if self.first_burst { 2 } else { 1 };
            self.first_burst = false;
            for kind in [SampleKind::ZeroCal, SampleKind::RefCal] {
                for _ in 0..bursts {
                    let packet = self.cal_packet(kind);
                    self.queue.push_back((packet, self.slot));
                }
            }
            self.next_cal_slot += self.cal_every_slots;
            return;
        }
        // Mostly 3 samples a packet, some 2 or 1, as a host that polls faster gets.
        let n = match self.measurement_packets {
            p if p % 11 == 10 => 1,
            p if p % 7 == 6 => 2,
            _ => 3,
        };
        self.measurement_packets += 1;
        let first = self.slot;
        self.slot += n;
        if self.config.drop_every.is_some_and(|k| self.measurement_packets.is_multiple_of(k)) {
            self.dropped = self.dropped.wrapping_add(n as u16);
            self.lock().dropped_packets += 1;
            return;
        }
        let volts =
            f64::from(self.lock().registers.get(&op::MAIN_VOLTAGE).copied().unwrap_or(0)) / protocol::FLOAT_TO_INT;
        let scale = if self.config.model == MonsoonModel::Hvpm { 4.0 } else { 2.0 };
        let volts_raw = (volts / (ADC_RATIO * scale)).round().clamp(0.0, 65535.0) as u16;
        let lines = [self.line(0), self.line(1)];
        let samples = (first..first + n).map(|i| self.measurement(i as f64 / RATE_HZ, volts_raw, lines)).collect();
        let packet = Packet { dropped: self.dropped, flags: 0, samples }.to_bytes();
        self.queue.push_back((packet, self.slot));
    }

    fn start(&mut self, cal_ms: u16) {
        self.slot = 0;
        self.measurement_packets = 0;
        self.dropped = 0;
        self.next_cal_slot = 0;
        self.cal_every_slots = (u64::from(cal_ms.max(1)) * RATE_HZ as u64 / 1000).max(1);
        self.first_burst = true;
        self.queue.clear();
        self.started = Instant::now();
    }

    fn gone(&self) -> Result<(), UsbError> {
        if self.lock().disconnected { Err(UsbError::Disconnected) } else { Ok(()) }
    }
}

impl UsbLink for FakeMonsoon {
    fn control_out(&mut self, setup: Setup, data: &[u8]) -> Result<(), UsbError> {
        self.gone()?;
        let mut s = self.lock();
        s.controls.push(ControlCall { setup, data: data.to_vec() });
        let Setup { request_type, request, value, index } = setup;
        if request_type != protocol::REQUEST_OUT {
            return Err(UsbError::Stall);
        }
        match request {
            protocol::SET_VALUE => {
                // The firmware refuses commands while sampling (pmapi.py `verifyReady`).
                if s.sampling {
                    return Err(UsbError::Stall);
                }
                let opcode = (index & 0xFF) as u8;
                let v = match data {
                    [a, b, c, d] => u32::from_le_bytes([*a, *b, *c, *d]),
                    _ => u32::from(value) | (u32::from(index >> 8) << 16),
                };
                s.registers.insert(opcode, v);
                if opcode == op::USB_PASSTHROUGH {
                    s.passthrough.push(v as u8);
                }
            }
            protocol::START => {
                s.sampling = true;
                s.starts += 1;
                drop(s);
                self.start(value);
            }
            protocol::STOP => s.sampling = false,
            _ => return Err(UsbError::Stall),
        }
        Ok(())
    }

    fn control_in(&mut self, setup: Setup, len: u16) -> Result<Vec<u8>, UsbError> {
        self.gone()?;
        let mut s = self.lock();
        s.controls.push(ControlCall { setup, data: len.to_le_bytes().to_vec() });
        let Setup { request_type, request, index, .. } = setup;
        if request_type != protocol::REQUEST_IN || request != protocol::SET_VALUE {
            return Err(UsbError::Stall);
        }
        let opcode = (index & 0xFF) as u8;
        let v = if opcode == op::START_STATUS {
            if s.sampling { u32::from(protocol::SAMPLING_BIT) } else { 0 }
        } else {
            s.registers.get(&opcode).copied().unwrap_or(0)
        };
        Ok(v.to_le_bytes()[..usize::from(len).min(4)].to_vec())
    }

    fn bulk_in(&mut self, timeout: Duration) -> Result<Option<Vec<u8>>, UsbError> {
        self.gone()?;
        if !self.lock().sampling {
            std::thread::sleep(timeout.min(Duration::from_millis(5)));
            return Ok(None);
        }
        while self.queue.is_empty() {
            self.generate();
        }
        let (packet, slot_end) = self.queue[0];
        if self.config.paced {
            // A packet leaves once its last sample is taken.
            let ready = self.started + Duration::from_secs_f64(slot_end as f64 / RATE_HZ);
            let now = Instant::now();
            if ready > now + timeout {
                std::thread::sleep(timeout);
                return Ok(None);
            }
            std::thread::sleep(ready.saturating_duration_since(now));
        }
        self.queue.pop_front();
        let mut s = self.lock();
        s.packets += 1;
        if self.config.disconnect_after.is_some_and(|n| s.packets > n) {
            s.disconnected = true;
            return Err(UsbError::Disconnected);
        }
        Ok(Some(packet.to_vec()))
    }
}
