//! A quantity over one attempt's time, e.g. the battery level during the soak, kept at
//! collect time so that reports never go back to the raw files.

use serde::{Deserialize, Serialize};

/// The battery level in % of capacity (from the charge counter where there is one).
pub const BATTERY_PCT: &str = "battery_pct";
/// A power monitor's power over the soak, mW, time from the soak's start (a few hundred
/// points, each the mean of its stretch of samples).
pub const MONITOR_POWER_MW: &str = "monitor_power_mw";

/// Values over time: `points` are (seconds since launch, value), in time order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Series {
    /// What it is: [`BATTERY_PCT`], ...
    pub name: String,
    pub unit: String,
    /// Where it came from, as for a [`Measurement`](super::Measurement).
    pub source: String,
    pub points: Vec<(f64, f64)>,
}

/// Stored points that are not whole (time, value) pairs of 8-byte floats.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{len} bytes is not a whole number of 16-byte (time, value) points")]
pub struct SeriesDecodeError {
    pub len: usize,
}

impl Series {
    pub fn new(name: &str, unit: &str, source: &str, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), unit: unit.into(), source: source.into(), points }
    }

    /// The points as little-endian f64 pairs: compact (16 bytes a point) and exact, where
    /// JSON text would be three times larger and, parsed back, not always bit-identical.
    pub fn points_blob(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.points.len() * 16);
        for (t, v) in &self.points {
            out.extend_from_slice(&t.to_le_bytes());
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// The points back from [`points_blob`](Self::points_blob).
    pub fn points_from_blob(blob: &[u8]) -> Result<Vec<(f64, f64)>, SeriesDecodeError> {
        Ok(Self::points_in_blob(blob)?.collect())
    }

    /// The points of a blob one by one, for a reader that reduces them as they come.
    pub fn points_in_blob(blob: &[u8]) -> Result<impl Iterator<Item = (f64, f64)> + '_, SeriesDecodeError> {
        if !blob.len().is_multiple_of(16) {
            return Err(SeriesDecodeError { len: blob.len() });
        }
        let f = |b: &[u8]| f64::from_le_bytes(b.try_into().expect("8-byte chunk"));
        Ok(blob.chunks_exact(16).map(move |p| (f(&p[..8]), f(&p[8..]))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_survive_the_blob_bit_for_bit() {
        let s = Series::new(
            BATTERY_PCT,
            "%",
            "sim",
            vec![(0.0, 100.0), (60.0, 1711.0 / 1715.0 * 100.0), (-0.0, f64::MIN_POSITIVE)],
        );
        let blob = s.points_blob();
        assert_eq!(blob.len(), 48);
        let back = Series::points_from_blob(&blob).unwrap();
        let bits = |p: &[(f64, f64)]| p.iter().map(|(t, v)| (t.to_bits(), v.to_bits())).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&s.points));
        assert_eq!(Series::points_from_blob(&[]).unwrap(), []);
        assert_eq!(Series::points_from_blob(&blob[..20]), Err(SeriesDecodeError { len: 20 }));
    }
}
