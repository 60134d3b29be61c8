//! `Calibration`: the main channel's scales and zero offsets from the instrument's EEPROM,
//! read as Monsoon's Python API reads them in `fillStatusPacket` (HVPM.py: stored scales
//! and signed zero offsets; LVPM.py: scales computed from the shunt resistors' offsets,
//! no zero offsets), and the per-model constants its `sampleEngine` decodes with.

use serde_json::{Value, json};

use super::protocol::{self, op};
use super::{UsbError, UsbLink};
use crate::config::MonsoonModel;

/// Each ADC count of a voltage channel, volts (`ADCRatio`).
pub const ADC_RATIO: f64 = 62.5 / 1e6;

#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub model: MonsoonModel,
    pub main_fine_scale: f64,
    pub main_coarse_scale: f64,
    pub main_fine_zero_offset: f64,
    pub main_coarse_zero_offset: f64,
}

impl Calibration {
    /// Reads the main channel's calibration from the EEPROM.
    pub fn read(link: &mut dyn UsbLink, model: MonsoonModel) -> Result<Calibration, UsbError> {
        match model {
            MonsoonModel::Hvpm => Ok(Calibration {
                model,
                main_fine_scale: protocol::get(link, op::MAIN_FINE_SCALE, 2, false)? as f64,
                main_coarse_scale: protocol::get(link, op::MAIN_COARSE_SCALE, 2, false)? as f64,
                main_fine_zero_offset: protocol::get(link, op::MAIN_FINE_ZERO_OFFSET, 2, true)? as f64,
                main_coarse_zero_offset: protocol::get(link, op::MAIN_COARSE_ZERO_OFFSET, 2, true)? as f64,
            }),
            MonsoonModel::Lvpm => {
                // Read unsigned, as LVPM.py does (its comment says signed; its code does not).
                let fine = protocol::get(link, op::MAIN_FINE_RESISTOR_OFFSET, 1, false)? as f64;
                let coarse = protocol::get(link, op::MAIN_COARSE_RESISTOR_OFFSET, 1, false)? as f64;
                Ok(Calibration::lvpm(fine, coarse))
            }
        }
    }

    /// An LVPM's from its resistor offsets (LVPM.py: ohms = 0.05 + 0.0001 × offset).
    pub fn lvpm(fine_offset: f64, coarse_offset: f64) -> Calibration {
        let factory = 0.050;
        let fine_resistor = factory + fine_offset * 0.0001;
        let coarse_resistor = factory + coarse_offset * 0.0001;
        Calibration {
            model: MonsoonModel::Lvpm,
            main_fine_scale: 35946.0 * (factory / fine_resistor),
            main_coarse_scale: 3103.4 * (factory / coarse_resistor),
            main_fine_zero_offset: 0.0,
            main_coarse_zero_offset: 0.0,
        }
    }

    /// Below this raw fine reading the fine range is used (`fineThreshold`).
    pub fn fine_threshold(&self) -> f64 {
        match self.model {
            MonsoonModel::Hvpm => 64000.0,
            MonsoonModel::Lvpm => 30000.0,
        }
    }

    /// The main voltage channel's divider (`mainvoltageScale`).
    pub fn voltage_scale(&self) -> f64 {
        match self.model {
            MonsoonModel::Hvpm => 4.0,
            MonsoonModel::Lvpm => 2.0,
        }
    }

    /// For the manifest.
    pub fn to_json(&self) -> Value {
        json!({
            "main_fine_scale": self.main_fine_scale,
            "main_coarse_scale": self.main_coarse_scale,
            "main_fine_zero_offset": self.main_fine_zero_offset,
            "main_coarse_zero_offset": self.main_coarse_zero_offset,
        })
    }
}
