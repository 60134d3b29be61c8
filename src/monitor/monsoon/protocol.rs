//! The Monsoon USB protocol as Monsoon's Python API speaks it (`monsoon` 0.1.88 on PyPI:
//! Monsoon/pmapi.py `USB_protocol`, Monsoon/Operations.py): requests, opcodes and how a
//! value is packed into a control transfer, so lab sends the instrument the same bytes.

use super::{Setup, UsbError, UsbLink};

/// Monsoon Solutions' USB vendor id, and the product id of both HVPM and LVPM.
pub const VENDOR_ID: u16 = 0x2AB9;
pub const PRODUCT_ID: u16 = 0x0001;

/// `bmRequestType` of every request: vendor, device, OUT or IN (`Control_Codes`).
pub const REQUEST_OUT: u8 = 0x40;
pub const REQUEST_IN: u8 = 0xC0;
/// `bRequest`: set or get one EEPROM/status value, start and stop sampling.
pub const SET_VALUE: u8 = 0x01;
pub const START: u8 = 0x02;
pub const STOP: u8 = 0x03;

/// A set voltage is sent as volts × 2²⁰ (`Conversion.FLOAT_TO_INT`).
pub const FLOAT_TO_INT: f64 = 1_048_576.0;
/// Milliseconds between calibration samples the API starts sampling with (its default).
pub const CAL_TIME_MS: u32 = 1250;
/// "Sample until told to stop" (`triggers.SAMPLECOUNT_INFINITE`).
pub const SAMPLE_FOREVER: u32 = 0xFFFF_FFFF;
/// The `getStartStatus` bit that says the unit is sampling (firmware 26 and later).
pub const SAMPLING_BIT: u8 = 0x80;

/// Opcodes (`Operations.OpCodes`): the `wIndex` low byte of a SET_VALUE request.
pub mod op {
    pub const MAIN_FINE_RESISTOR_OFFSET: u8 = 0x02;
    pub const POWERUP_TIME: u8 = 0x0C;
    pub const USB_FINE_RESISTOR_OFFSET: u8 = 0x0D;
    pub const AUX_FINE_RESISTOR_OFFSET: u8 = 0x0E;
    pub const USB_PASSTHROUGH: u8 = 0x10;
    pub const MAIN_COARSE_RESISTOR_OFFSET: u8 = 0x11;
    pub const USB_COARSE_RESISTOR_OFFSET: u8 = 0x12;
    pub const AUX_COARSE_RESISTOR_OFFSET: u8 = 0x13;
    pub const MAIN_FINE_SCALE: u8 = 0x1A;
    pub const MAIN_COARSE_SCALE: u8 = 0x1B;
    pub const USB_FINE_SCALE: u8 = 0x1C;
    pub const USB_COARSE_SCALE: u8 = 0x1D;
    pub const AUX_FINE_SCALE: u8 = 0x1E;
    pub const AUX_COARSE_SCALE: u8 = 0x1F;
    pub const VOLTAGE_CHANNEL: u8 = 0x23;
    pub const MAIN_FINE_ZERO_OFFSET: u8 = 0x25;
    pub const MAIN_COARSE_ZERO_OFFSET: u8 = 0x26;
    pub const USB_FINE_ZERO_OFFSET: u8 = 0x27;
    pub const USB_COARSE_ZERO_OFFSET: u8 = 0x28;
    pub const TEMPERATURE_LIMIT: u8 = 0x29;
    pub const MAIN_VOLTAGE: u8 = 0x41;
    pub const SERIAL_NUMBER: u8 = 0x42;
    pub const POWERUP_CURRENT_LIMIT: u8 = 0x43;
    pub const RUN_CURRENT_LIMIT: u8 = 0x44;
    pub const HARDWARE_MODEL: u8 = 0x45;
    pub const DAC_CAL_LOW: u8 = 0x88;
    pub const DAC_CAL_HIGH: u8 = 0x89;
    pub const FIRMWARE_VERSION: u8 = 0xC0;
    pub const PROTOCOL_VERSION: u8 = 0xC1;
    pub const START_STATUS: u8 = 0xC4;
}

/// `HardwareModel` values.
pub const MODEL_LVPM: i64 = 1;
pub const MODEL_HVPM: i64 = 2;

/// The wValue, wIndex and data of `sendCommand(op, value)`: the value's 4 little-endian
/// bytes as data, its low two in wValue and its third in wIndex's high byte.
pub fn command(opcode: u8, value: u32) -> (u16, u16, [u8; 4]) {
    let b = value.to_le_bytes();
    (u16::from_le_bytes([b[0], b[1]]), u16::from_le_bytes([opcode, b[2]]), b)
}

/// Sets one value (`sendCommand`).
pub fn set(link: &mut dyn UsbLink, opcode: u8, value: u32) -> Result<(), UsbError> {
    let (value, index, data) = command(opcode, value);
    link.control_out(Setup { request_type: REQUEST_OUT, request: SET_VALUE, value, index }, &data)
}

/// Reads one value of `len` bytes (1, 2 or 4), little-endian, signed or not (`getValue`).
pub fn get(link: &mut dyn UsbLink, opcode: u8, len: usize, signed: bool) -> Result<i64, UsbError> {
    let got =
        link.control_in(Setup { request_type: REQUEST_IN, request: SET_VALUE, value: 0, index: opcode.into() }, 4)?;
    let Some(bytes) = got.get(..len) else {
        return Err(UsbError::Other(format!("{} bytes for opcode {opcode:#04x}, wanted {len}", got.len())));
    };
    Ok(match (len, signed) {
        (1, false) => i64::from(bytes[0]),
        (1, true) => i64::from(bytes[0] as i8),
        (2, false) => i64::from(u16::from_le_bytes([bytes[0], bytes[1]])),
        (2, true) => i64::from(i16::from_le_bytes([bytes[0], bytes[1]])),
        (_, false) => i64::from(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
        (_, true) => i64::from(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
    })
}

/// Starts sampling (`startSampling`): calibration every `cal_ms`, for `max_samples`.
pub fn start(link: &mut dyn UsbLink, cal_ms: u32, max_samples: u32) -> Result<(), UsbError> {
    let cal = cal_ms.to_le_bytes();
    let value = u16::from_le_bytes([cal[0], cal[1]]);
    link.control_out(Setup { request_type: REQUEST_OUT, request: START, value, index: 0 }, &max_samples.to_le_bytes())
}

/// Stops sampling (`stopSampling`).
pub fn stop(link: &mut dyn UsbLink) -> Result<(), UsbError> {
    link.control_out(Setup { request_type: REQUEST_OUT, request: STOP, value: 0, index: 0 }, &[])
}

/// The HVPM's current limit register for `amps` (HVPM.py `raw_from_amps`, truncated as
/// `sendCommand`'s `int()` does).
pub fn hvpm_limit_raw(amps: f64) -> u32 {
    ((65535.0 - 3840.0) * (amps / 15.625) + 3840.0) as u32
}

/// The LVPM's (LVPM.py `raw_from_amps`).
pub fn lvpm_limit_raw(amps: f64) -> u32 {
    (1023.0 * (1.0 - amps / 8.0)) as u32
}

/// The voltage register for `volts` (`setVout`).
pub fn voltage_raw(volts: f64) -> u32 {
    (volts * FLOAT_TO_INT) as u32
}
