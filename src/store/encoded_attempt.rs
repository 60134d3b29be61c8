//! `EncodedAttempt`: an attempt as the store writes it, every column already encoded.
//!
//! Encoding (JSON texts, the state digest, the series' blobs) is done by whoever records the
//! attempt, on its own thread, so that the one connection that commits attempts spends its
//! time in SQLite only: on a fast simulated lab the recording thread is the one that all
//! devices wait on, and encoding was a third of its time.

use super::records::{AttemptRecord, AttemptStatus, Attestation};
use super::state_digest::StateDigest;
use crate::measure::{Measurement, Series, UntetherMode};

/// One series' columns: name, unit, source and its points blob (`Series::points_blob`).
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesRow {
    pub name: String,
    pub unit: String,
    pub source: String,
    pub points: Vec<u8>,
}

impl SeriesRow {
    /// Takes the series: its names move into the row, its points become the blob.
    pub fn of(s: Series) -> SeriesRow {
        let points = s.points_blob();
        SeriesRow { name: s.name, unit: s.unit, source: s.source, points }
    }

    /// A battery curve a report can draw: a non-empty `battery_pct` series.
    pub fn is_battery(&self) -> bool {
        self.name == crate::measure::BATTERY_PCT && !self.points.is_empty()
    }
}

/// The columns of one attempt's rows in `attempts`, `attempt_report`, `measurements`,
/// `series` and `attestations`.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedAttempt {
    pub campaign: String,
    pub trial_idx: u32,
    pub attempt: u32,
    pub device: String,
    pub status: AttemptStatus,
    /// JSON texts of the record's lists.
    pub reasons: String,
    pub phases: String,
    pub labels: String,
    pub started_at: String,
    pub ended_at: String,
    pub soak_start_s: f64,
    pub artifact_dir: String,
    /// The state snapshots' JSON texts; `state_soak` is `None` where the device kept none.
    pub state_before: String,
    pub state_after: String,
    pub state_soak: Option<String>,
    /// `StateDigest::to_blob` of the three snapshots.
    pub state_digest: Vec<u8>,
    pub untether: Option<UntetherMode>,
    pub measurements: Vec<Measurement>,
    pub series: Vec<SeriesRow>,
    pub attestations: Vec<Attestation>,
}

impl EncodedAttempt {
    /// The record's columns. Takes the record, so that its measurements and attestations
    /// move instead of being copied.
    pub fn encode(a: AttemptRecord) -> EncodedAttempt {
        let json = |v: &serde_json::Value| v.to_string();
        let state_digest = StateDigest::from_json(&a.state_before, &a.state_soak, &a.state_after).to_blob();
        EncodedAttempt {
            reasons: list_json(&a.reasons),
            phases: list_json(&a.phases),
            labels: list_json(&a.labels),
            state_before: json(&a.state_before),
            state_after: json(&a.state_after),
            state_soak: (!a.state_soak.is_null()).then(|| json(&a.state_soak)),
            state_digest,
            series: a.series.into_iter().map(SeriesRow::of).collect(),
            campaign: a.campaign,
            trial_idx: a.trial_idx,
            attempt: a.attempt,
            device: a.device,
            status: a.status,
            started_at: a.started_at,
            ended_at: a.ended_at,
            soak_start_s: a.soak_start_s,
            artifact_dir: a.artifact_dir,
            untether: a.untether,
            measurements: a.measurements,
            attestations: a.attestations,
        }
    }
}

/// The JSON text of a list an attempt keeps as text (its reasons, phases and labels):
/// strings, or (phase, seconds) pairs written `[["prepare",0.0],…]` with a non-finite
/// number as `null`. `serde_json` cannot fail on these; `[]` is the fallback all the same.
pub fn list_json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_columns_are_the_records_texts_and_blobs() {
        let mut a = crate::store::test_attempt("c1", 3, 1, true);
        a.reasons = vec!["still \"charging\"".into()];
        a.phases = vec![("prepare".into(), 1.5), ("soak".into(), 600.0)];
        a.state_before = serde_json::json!({"brightness_pct": {"state": "known", "value": 50.0, "from": "set"}});
        a.state_soak = serde_json::Value::Null;
        a.series = vec![Series {
            name: "battery_pct".into(),
            unit: "%".into(),
            source: "s".into(),
            points: vec![(0.0, 99.5)],
        }];
        let row = EncodedAttempt::encode(a.clone());
        assert_eq!(row.reasons, serde_json::to_string(&a.reasons).unwrap());
        assert_eq!(row.phases, r#"[["prepare",1.5],["soak",600.0]]"#);
        assert_eq!(row.state_before, a.state_before.to_string());
        assert_eq!(row.state_soak, None, "no soak snapshot, no text");
        assert_eq!(
            StateDigest::from_blob(&row.state_digest).unwrap(),
            StateDigest::from_json(&a.state_before, &a.state_soak, &a.state_after)
        );
        assert_eq!(row.series[0].points, a.series[0].points_blob());
        assert_eq!((row.campaign.as_str(), row.trial_idx, row.attempt), ("c1", 3, 1));
        assert_eq!(row.measurements, a.measurements);
    }
}
