//! `FakeMonsoon`: a scripted Monsoon behind `UsbLink`, for lab's tests and any crate that
//! drives a `Monsoon` session without the instrument. It answers the control requests as
//! the instrument does (its EEPROM: calibration, versions, serial, limits; the sampling
//! bit of the start status), and once started streams sample packets of a known current
//! draw at the set voltage, with zero- and reference-calibration packets interleaved:
//! enough at the start to calibrate, then one of each every calibration period the start
//! request gave. It can drop packets (counting them in the header as the instrument
//! does), leave USB after N packets, and records every control request and passthrough
//! change for tests to assert on.
//!
//! **Built apart from lab's side.** Everything the fake encodes comes from Monsoon's own
//! Python API (`monsoon` 0.1.88 on PyPI), read for this file and written again here: the
//! control codes, opcodes and the volts × 2²⁰ voltage register (Operations.py, pmapi.py),
//! the ADC's 62.5 µV a count and the main voltage's divider of 4 (HVPM) or 2 (LVPM)
//! (HVPM.py, LVPM.py, sampleEngine.py), the LVPM's scales from its shunt resistors
//! (LVPM.py `fillStatusPacket`), the calibration arithmetic it inverts (sampleEngine.py
//! `__vectorProcess`), and the packet layout (`fake_packet.rs`, from `swizzlePacket`). It
//! uses none of lab's `protocol`, `calibration` or `decode` code or constants, so a slip
//! there is not repeated here: the tests that decode the fake's stream with lab's decoder
//! catch it. What checks the fake itself: `python_check.rs` feeds every packet of its
//! stream to the API's own `swizzlePacket` (the fields come back as the fake meant them)
//! and its own `SampleEngine` (docs/platforms/monitors.md, "How it was verified").

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::fake_packet::{self, ApiPacket, ApiSample};
use super::{Setup, UsbError, UsbLink};
use crate::config::MonsoonModel;

/// The protocol's numbers as Monsoon's Python API has them (Operations.py).
mod api {
    /// `Control_Codes`: bmRequestType and bRequest.
    pub const USB_OUT_PACKET: u8 = 0x40;
    pub const USB_IN_PACKET: u8 = 0xC0;
    pub const USB_SET_VALUE: u8 = 0x01;
    pub const USB_REQUEST_START: u8 = 0x02;
    pub const USB_REQUEST_STOP: u8 = 0x03;
    /// `Conversion.FLOAT_TO_INT`: the voltage register holds volts × this.
    pub const FLOAT_TO_INT: f64 = 1_048_576.0;
    /// `HardwareModel`.
    pub const LVPM: u32 = 1;
    pub const HVPM: u32 = 2;
    /// `getStartStatus`'s sample-mode bit (pmapi.py `verifyReady`).
    pub const SAMPLE_MODE: u32 = 0x80;
    /// Each ADC count of a voltage channel, volts (`ADCRatio`).
    pub const ADC_VOLTS: f64 = 62.5 / 1e6;
    /// `mainvoltageScale`.
    pub const HVPM_MAIN_VOLTAGE_SCALE: f64 = 4.0;
    pub const LVPM_MAIN_VOLTAGE_SCALE: f64 = 2.0;
    /// LVPM.py: `factoryRes` ohms, + 0.0001 ohm a count of a resistor offset; the main
    /// channel's fine and coarse scales at the factory resistance.
    pub const LVPM_FACTORY_OHMS: f64 = 0.050;
    pub const LVPM_OHMS_PER_OFFSET: f64 = 0.0001;
    pub const LVPM_FINE_SCALE: f64 = 35946.0;
    pub const LVPM_COARSE_SCALE: f64 = 3103.4;

    /// `OpCodes`.
    pub mod op {
        pub const SET_MAIN_FINE_RESISTOR_OFFSET: u8 = 0x02;
        pub const SET_POWERUP_TIME: u8 = 0x0C;
        pub const SET_USB_FINE_RESISTOR_OFFSET: u8 = 0x0D;
        pub const SET_AUX_FINE_RESISTOR_OFFSET: u8 = 0x0E;
        pub const SET_USB_PASSTHROUGH_MODE: u8 = 0x10;
        pub const SET_MAIN_COARSE_RESISTOR_OFFSET: u8 = 0x11;
        pub const SET_USB_COARSE_RESISTOR_OFFSET: u8 = 0x12;
        pub const SET_AUX_COARSE_RESISTOR_OFFSET: u8 = 0x13;
        pub const SET_MAIN_FINE_SCALE: u8 = 0x1A;
        pub const SET_MAIN_COARSE_SCALE: u8 = 0x1B;
        pub const SET_USB_FINE_SCALE: u8 = 0x1C;
        pub const SET_USB_COARSE_SCALE: u8 = 0x1D;
        pub const SET_AUX_FINE_SCALE: u8 = 0x1E;
        pub const SET_AUX_COARSE_SCALE: u8 = 0x1F;
        pub const SET_MAIN_FINE_ZERO_OFFSET: u8 = 0x25;
        pub const SET_MAIN_COARSE_ZERO_OFFSET: u8 = 0x26;
        pub const SET_USB_FINE_ZERO_OFFSET: u8 = 0x27;
        pub const SET_USB_COARSE_ZERO_OFFSET: u8 = 0x28;
        pub const SET_MAIN_VOLTAGE: u8 = 0x41;
        pub const GET_SERIAL_NUMBER: u8 = 0x42;
        pub const HARDWARE_MODEL: u8 = 0x45;
        pub const DAC_CAL_LOW: u8 = 0x88;
        pub const DAC_CAL_HIGH: u8 = 0x89;
        pub const FIRMWARE_VERSION: u8 = 0xC0;
        pub const PROTOCOL_VERSION: u8 = 0xC1;
        pub const GET_START_STATUS: u8 = 0xC4;
    }
}

use api::op;

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
    /// Keep every delivered packet's fields (`FakeLog::sent`), for the cross-check.
    pub keep_packets: bool,
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
            keep_packets: false,
        }
    }
}

/// The calibration readings the fake's ranges give, before their noise (± 3 counts), in
/// `ApiSample::currents` order: zero, then reference.
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
    sent: Vec<ApiPacket>,
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
        f64::from(self.register(op::SET_MAIN_VOLTAGE)) / api::FLOAT_TO_INT
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

    /// The fields of every packet delivered, in order (with `keep_packets`).
    pub fn sent(&self) -> Vec<ApiPacket> {
        self.lock().sent.clone()
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
    queue: VecDeque<(ApiPacket, u64)>,
    rng: u64,
}

impl FakeMonsoon {
    pub fn new(config: FakeConfig) -> FakeMonsoon {
        let mut registers = BTreeMap::new();
        let hv = config.model == MonsoonModel::Hvpm;
        let model = if hv { api::HVPM } else { api::LVPM };
        registers.extend([
            (op::HARDWARE_MODEL, model),
            (op::FIRMWARE_VERSION, u32::from(config.firmware)),
            (op::PROTOCOL_VERSION, 24),
            (op::GET_SERIAL_NUMBER, u32::from(config.serial)),
            (op::SET_USB_PASSTHROUGH_MODE, 2),
            (op::SET_POWERUP_TIME, 100),
            (op::DAC_CAL_LOW, u32::from(config.dac_cal.0)),
            (op::DAC_CAL_HIGH, u32::from(config.dac_cal.1)),
            // HVPM.py's default scales and offsets (`setDefaultScaleValues`).
            (op::SET_MAIN_FINE_SCALE, 36500),
            (op::SET_MAIN_COARSE_SCALE, 6400),
            (op::SET_USB_FINE_SCALE, 14000),
            (op::SET_USB_COARSE_SCALE, 600),
            (op::SET_AUX_FINE_SCALE, 3100),
            (op::SET_AUX_COARSE_SCALE, 250),
            (op::SET_MAIN_FINE_ZERO_OFFSET, 15),
            // A negative one, so its sign is read: -7 as the EEPROM's 16 bits hold it.
            (op::SET_MAIN_COARSE_ZERO_OFFSET, 0x10000 - 7),
            (op::SET_USB_FINE_ZERO_OFFSET, 0),
            (op::SET_USB_COARSE_ZERO_OFFSET, 0),
            // LVPM: shunt resistor offsets, 0.1 mΩ each.
            (op::SET_MAIN_FINE_RESISTOR_OFFSET, 3),
            (op::SET_MAIN_COARSE_RESISTOR_OFFSET, 251),
            (op::SET_USB_FINE_RESISTOR_OFFSET, 0),
            (op::SET_USB_COARSE_RESISTOR_OFFSET, 0),
            (op::SET_AUX_FINE_RESISTOR_OFFSET, 0),
            (op::SET_AUX_COARSE_RESISTOR_OFFSET, 0),
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
    /// 1 fine), as sampleEngine.py's `__vectorProcess` finds them from the noise-free
    /// readings: zero = the EEPROM's zero offset + the zero reading, slope = the range's
    /// scale ÷ (reference reading − zero).
    fn line(&self, range: usize) -> (f64, f64) {
        let s = self.lock();
        let reg = |o: u8| s.registers.get(&o).copied().unwrap_or(0);
        // HVPM.py reads the zero offsets as 16-bit signed, LVPM.py has none.
        let signed16 = |o: u8| f64::from(reg(o) & 0xFFFF) - if reg(o) & 0x8000 != 0 { 65536.0 } else { 0.0 };
        let (scale, eeprom_zero) = match (self.config.model, range) {
            (MonsoonModel::Hvpm, 0) => {
                (f64::from(reg(op::SET_MAIN_COARSE_SCALE)), signed16(op::SET_MAIN_COARSE_ZERO_OFFSET))
            }
            (MonsoonModel::Hvpm, _) => {
                (f64::from(reg(op::SET_MAIN_FINE_SCALE)), signed16(op::SET_MAIN_FINE_ZERO_OFFSET))
            }
            // LVPM.py: the scale at the factory resistance, × factory ÷ this unit's ohms
            // (its offset read as one unsigned byte).
            (MonsoonModel::Lvpm, range) => {
                let (opcode, factory_scale) = if range == 0 {
                    (op::SET_MAIN_COARSE_RESISTOR_OFFSET, api::LVPM_COARSE_SCALE)
                } else {
                    (op::SET_MAIN_FINE_RESISTOR_OFFSET, api::LVPM_FINE_SCALE)
                };
                let ohms = api::LVPM_FACTORY_OHMS + f64::from(reg(opcode) & 0xFF) * api::LVPM_OHMS_PER_OFFSET;
                (factory_scale * (api::LVPM_FACTORY_OHMS / ohms), 0.0)
            }
        };
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

    fn cal_packet(&mut self, sample_type: u8) -> ApiPacket {
        let base = if sample_type == fake_packet::ZERO_CAL { ZERO_READINGS } else { REF_READINGS };
        let samples = (0..3)
            .map(|_| ApiSample {
                currents: base.map(|v| v + self.noise()),
                main_voltage: 0,
                usb_voltage: 0,
                sample_type,
            })
            .collect();
        ApiPacket { dropped: self.dropped, flags: 0, samples }
    }

    /// One measurement: the draw at `t` as the counts the API's arithmetic turns back
    /// into it (rounded to whole counts).
    fn measurement(&self, t: f64, volts_raw: u16, lines: [(f64, f64); 2]) -> ApiSample {
        let ma = self.config.draw.ma_at(t);
        let (lo, hi) = match self.config.model {
            MonsoonModel::Hvpm => (0.0, 65535.0),
            MonsoonModel::Lvpm => (-32768.0, 32767.0),
        };
        let [(coarse_zero, coarse_slope), (fine_zero, fine_slope)] = lines;
        let coarse = (coarse_zero + ma / coarse_slope).round().clamp(lo, hi) as i32;
        // Past its range the fine reading saturates, and the decoder takes the coarse one.
        let fine = (fine_zero + ma * 1000.0 / fine_slope).round().clamp(lo, hi) as i32;
        ApiSample {
            currents: [coarse, fine, 100, 100, 100, 100],
            main_voltage: volts_raw,
            usb_voltage: 0,
            sample_type: fake_packet::MEASUREMENT,
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
            for sample_type in [fake_packet::ZERO_CAL, fake_packet::REF_CAL] {
                for _ in 0..bursts {
                    let packet = self.cal_packet(sample_type);
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
            f64::from(self.lock().registers.get(&op::SET_MAIN_VOLTAGE).copied().unwrap_or(0)) / api::FLOAT_TO_INT;
        let scale = match self.config.model {
            MonsoonModel::Hvpm => api::HVPM_MAIN_VOLTAGE_SCALE,
            MonsoonModel::Lvpm => api::LVPM_MAIN_VOLTAGE_SCALE,
        };
        let volts_raw = (volts / (api::ADC_VOLTS * scale)).round().clamp(0.0, 65535.0) as u16;
        let lines = [self.line(0), self.line(1)];
        let samples = (first..first + n).map(|i| self.measurement(i as f64 / RATE_HZ, volts_raw, lines)).collect();
        let packet = ApiPacket { dropped: self.dropped, flags: 0, samples };
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
        if request_type != api::USB_OUT_PACKET {
            return Err(UsbError::Stall);
        }
        match request {
            api::USB_SET_VALUE => {
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
                if opcode == op::SET_USB_PASSTHROUGH_MODE {
                    s.passthrough.push(v as u8);
                }
            }
            api::USB_REQUEST_START => {
                s.sampling = true;
                s.starts += 1;
                drop(s);
                self.start(value);
            }
            api::USB_REQUEST_STOP => s.sampling = false,
            _ => return Err(UsbError::Stall),
        }
        Ok(())
    }

    fn control_in(&mut self, setup: Setup, len: u16) -> Result<Vec<u8>, UsbError> {
        self.gone()?;
        let mut s = self.lock();
        s.controls.push(ControlCall { setup, data: len.to_le_bytes().to_vec() });
        let Setup { request_type, request, index, .. } = setup;
        if request_type != api::USB_IN_PACKET || request != api::USB_SET_VALUE {
            return Err(UsbError::Stall);
        }
        let opcode = (index & 0xFF) as u8;
        let v = if opcode == op::GET_START_STATUS {
            if s.sampling { api::SAMPLE_MODE } else { 0 }
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
        let slot_end = self.queue[0].1;
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
        let Some((packet, _)) = self.queue.pop_front() else { return Ok(None) };
        let keep = self.config.keep_packets;
        let mut s = self.lock();
        s.packets += 1;
        if self.config.disconnect_after.is_some_and(|n| s.packets > n) {
            s.disconnected = true;
            return Err(UsbError::Disconnected);
        }
        let bytes = packet.bytes().to_vec();
        if keep {
            s.sent.push(packet);
        }
        Ok(Some(bytes))
    }
}
