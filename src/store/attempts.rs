//! Reading a campaign's attempts back with their measurements, series and attestations.

use super::backend::{Conn, DbError, vals};
use super::error::StoreError;
use super::records::*;
use super::store::Store;
use crate::measure::{Measurement, Series, UntetherMode};

/// Hands rows keyed by (trial, attempt) to their attempts. Both are ordered by that key:
/// one pass.
pub(super) fn merge<T>(
    attempts: &mut [AttemptRecord],
    rows: impl IntoIterator<Item = ((u32, u32), T)>,
    put: impl Fn(&mut AttemptRecord, T),
) {
    let mut i = 0;
    for (key, row) in rows {
        while i < attempts.len() && (attempts[i].trial_idx, attempts[i].attempt) < key {
            i += 1;
        }
        if i < attempts.len() && (attempts[i].trial_idx, attempts[i].attempt) == key {
            put(&mut attempts[i], row);
        }
    }
}

/// [`Store::attempts`] on `c`.
fn attempt_records(c: &mut dyn Conn, id: &str) -> Result<Vec<AttemptRecord>, StoreError> {
    let attested = super::operator_steps::attestation_rows(c, id)?;
    let mut out: Vec<AttemptRecord> = Vec::new();
    c.query_each(
        "SELECT a.trial_idx, a.attempt, a.status, a.reasons, a.phases, a.started_at, a.ended_at, a.soak_start_s,
                a.artifact_dir, a.state_before, a.state_after, COALESCE(a.device, t.device), a.untether, a.labels, a.state_soak
         FROM attempts a JOIN trials t ON t.campaign = a.campaign AND t.idx = a.trial_idx
         WHERE a.campaign = ?1 ORDER BY a.trial_idx, a.attempt",
        &vals![id],
        &mut |r| {
            let json = |i: usize| r.text(i).map(|t| t.unwrap_or(""));
            out.push(AttemptRecord {
                campaign: id.to_string(),
                trial_idx: r.get(0)?,
                attempt: r.get(1)?,
                device: r.get(11)?,
                status: if json(2)? == "valid" { AttemptStatus::Valid } else { AttemptStatus::Invalid },
                reasons: serde_json::from_str(json(3)?).unwrap_or_default(),
                phases: serde_json::from_str(json(4)?).unwrap_or_default(),
                started_at: r.get(5)?,
                ended_at: r.get(6)?,
                soak_start_s: r.get(7)?,
                artifact_dir: r.get(8)?,
                measurements: Vec::new(),
                series: Vec::new(),
                state_before: serde_json::from_str(json(9)?).unwrap_or_default(),
                state_after: serde_json::from_str(json(10)?).unwrap_or_default(),
                state_soak: r.text(14)?.and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default(),
                untether: r.text(12)?.and_then(UntetherMode::parse),
                labels: serde_json::from_str(json(13)?).unwrap_or_default(),
                attestations: Vec::new(),
            });
            Ok(())
        },
    )?;
    let mut measurements = Vec::new();
    c.query_each(MEASUREMENTS_OF_CAMPAIGN, &vals![id], &mut |r| {
        let m = Measurement { metric: r.get(2)?, value: r.get(3)?, unit: r.get(4)?, source: r.get(5)? };
        measurements.push(((r.get(0)?, r.get(1)?), m));
        Ok(())
    })?;
    merge(&mut out, measurements, |a, m| a.measurements.push(m));
    let series = series_rows(c, id)?.into_iter().map(|s| ((s.trial_idx, s.attempt), s.series));
    merge(&mut out, series, |a, s| a.series.push(s));
    merge(&mut out, attested, |a, x| a.attestations.push(x));
    Ok(out)
}

/// A campaign's series, in (trial, attempt, seq) order: each attempt's `attempt_report`
/// row, then its range of series ids (the key is checked all the same).
pub(super) const SERIES_OF_CAMPAIGN: &str = "
    SELECT s.trial_idx, s.attempt, s.name, s.unit, s.source, s.points
    FROM attempt_report r JOIN series s ON s.id BETWEEN r.series_from AND r.series_to
    WHERE r.campaign = ?1 AND s.campaign = r.campaign AND s.trial_idx = r.trial_idx AND s.attempt = r.attempt
    ORDER BY r.trial_idx, r.attempt, s.seq";

/// A campaign's measurements as `SERIES_OF_CAMPAIGN` reads its series.
pub(super) const MEASUREMENTS_OF_CAMPAIGN: &str = "
    SELECT m.trial_idx, m.attempt, m.metric, m.value, m.unit, m.source
    FROM attempt_report r JOIN measurements m ON m.id BETWEEN r.measurements_from AND r.measurements_to
    WHERE r.campaign = ?1 AND m.campaign = r.campaign AND m.trial_idx = r.trial_idx AND m.attempt = r.attempt
    ORDER BY r.trial_idx, r.attempt, m.seq";

fn series_rows(c: &mut dyn Conn, id: &str) -> Result<Vec<AttemptSeries>, StoreError> {
    let mut out = Vec::new();
    c.query_each(SERIES_OF_CAMPAIGN, &vals![id], &mut |r| {
        let points = Series::points_from_blob(r.blob(5).unwrap_or_default())
            .map_err(|e| DbError::Type(format!("a series' points: {e}")))?;
        out.push(AttemptSeries {
            trial_idx: r.get(0)?,
            attempt: r.get(1)?,
            series: Series { name: r.get(2)?, unit: r.get(3)?, source: r.get(4)?, points },
        });
        Ok(())
    })?;
    Ok(out)
}

impl Store {
    /// Every series of a campaign's attempts, ordered by trial, attempt and as recorded.
    /// Attempts recorded before the store kept series (schema 3) have none.
    pub fn series(&self, id: &str) -> Result<Vec<AttemptSeries>, StoreError> {
        let id = id.to_string();
        self.db.call(move |c| c.read_transaction(|c| Ok(series_rows(c, &id))))?
    }

    /// Every attempt of a campaign with its measurements and series, ordered by trial and attempt.
    pub fn attempts(&self, id: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        let id = id.to_string();
        self.db.call(move |c| c.read_transaction(|c| Ok(attempt_records(c, &id))))?
    }
}
