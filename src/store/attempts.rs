//! Reading a campaign's attempts back with their measurements, series and attestations.

use super::backend::{Columns, Conn, DbError, FromRow, vals};
use super::error::StoreError;
use super::records::*;
use super::store::Store;
use crate::measure::Measurement;

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
        &format!(
            "SELECT {} FROM attempts a JOIN trials t ON t.campaign = a.campaign AND t.idx = a.trial_idx
             WHERE a.campaign = ?1 ORDER BY a.trial_idx, a.attempt",
            AttemptRecord::COLUMNS
        ),
        &vals![id],
        &mut |r| {
            out.push(r.read()?);
            Ok(())
        },
    )?;
    let mut measurements = Vec::new();
    c.query_each(MEASUREMENTS_OF_CAMPAIGN, &vals![id], &mut |r| {
        measurements.push(r.read::<((u32, u32), Measurement)>()?);
        Ok(())
    })?;
    merge(&mut out, measurements, |a, m| a.measurements.push(m));
    let series = series_rows(c, id)?.into_iter().map(|s| ((s.trial_idx, s.attempt), s.series));
    merge(&mut out, series, |a, s| a.series.push(s));
    merge(&mut out, attested, |a, x| a.attestations.push(x));
    Ok(out)
}

/// A campaign's series, in (trial, attempt, seq) order: each attempt's `attempt_report`
/// row, then its range of series ids (the key is checked all the same). The columns are
/// [`AttemptSeries`]'s.
pub(super) const SERIES_OF_CAMPAIGN: &str = "
    SELECT s.trial_idx, s.attempt, s.name, s.unit, s.source, s.points
    FROM attempt_report r JOIN series s ON s.id BETWEEN r.series_from AND r.series_to
    WHERE r.campaign = ?1 AND s.campaign = r.campaign AND s.trial_idx = r.trial_idx AND s.attempt = r.attempt
    ORDER BY r.trial_idx, r.attempt, s.seq";

/// A campaign's measurements as `SERIES_OF_CAMPAIGN` reads its series: each one's
/// (trial, attempt), then the columns of its [`Measurement`].
pub(super) const MEASUREMENTS_OF_CAMPAIGN: &str = "
    SELECT m.trial_idx, m.attempt, m.metric, m.value, m.unit, m.source
    FROM attempt_report r JOIN measurements m ON m.id BETWEEN r.measurements_from AND r.measurements_to
    WHERE r.campaign = ?1 AND m.campaign = r.campaign AND m.trial_idx = r.trial_idx AND m.attempt = r.attempt
    ORDER BY r.trial_idx, r.attempt, m.seq";

/// A measurement from `metric, value, unit, source` (the type is the measuring layer's;
/// its row is the store's).
impl FromRow<'_> for Measurement {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(Measurement { metric: c.get()?, value: c.get()?, unit: c.get()?, source: c.get()? })
    }
}

fn series_rows(c: &mut dyn Conn, id: &str) -> Result<Vec<AttemptSeries>, StoreError> {
    let mut out = Vec::new();
    c.query_each(SERIES_OF_CAMPAIGN, &vals![id], &mut |r| {
        out.push(r.read()?);
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
