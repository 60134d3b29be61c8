//! What can go wrong with a Monsoon: each message says what, on which instrument, and how
//! to fix it.

use super::UsbError;

#[derive(Debug, thiserror::Error)]
pub enum MonsoonError {
    #[error(
        "no Monsoon with serial {serial} on USB (Monsoons there: {found}); fix: check its USB cable and that it is switched on, and `lsusb -d 2ab9:` (the serial is on its label, or `lsusb -v -d 2ab9: | grep iSerial`)"
    )]
    NotFound { serial: String, found: String },
    #[error(
        "cannot open the Monsoon {serial} on USB: {why}; fix: let this user open it (a udev rule: SUBSYSTEM==\"usb\", ATTR{{idVendor}}==\"2ab9\", MODE=\"0666\") or close the program that holds it (Monsoon's PowerTool)"
    )]
    Open { serial: String, why: String },
    #[error(
        "the Monsoon {serial} failed while {doing}: {why}; fix: check its USB cable (no hub without its own supply) and run again"
    )]
    Usb { serial: String, doing: String, why: UsbError },
    #[error(
        "the Monsoon {serial} left USB {after_s:.3} s into sampling ({why}): the samples stop there; fix: check its USB cable and hub, then run again (its output may still be on)"
    )]
    Lost { serial: String, after_s: f64, why: UsbError },
    #[error(
        "the Monsoon {serial} is an {found}, but lab.toml says {expected}; fix: set the monitor's `model = \"{fix}\"`"
    )]
    WrongModel { serial: String, expected: String, found: String, fix: String },
    #[error(
        "the Monsoon HVPM {serial}'s voltage DAC calibration is out of tolerance (dacCalLow {low:#06x}, dacCalHigh {high:#06x}): its output voltage could be far off; fix: update it to firmware 32 and run `HVPM.calibrateVoltage()` with Monsoon's Python API, as Monsoon advises"
    )]
    DacCalibration { serial: String, low: i64, high: i64 },
    #[error(
        "the Monsoon {serial} sent no complete calibration within {seconds} s of starting (it sends zero and reference samples every 1.25 s); fix: power-cycle it and check its USB cable"
    )]
    NoCalibration { serial: String, seconds: f64 },
    /// A call out of order (a marker with nothing sampling, passthrough while sampling).
    #[error("the Monsoon {serial}: {what}")]
    State { serial: String, what: String },
}
