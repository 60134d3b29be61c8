//! Recording an attempt on SQLite: its rows written in rusqlite's own transaction, with
//! cached prepared statements (`batch::record` commits many in one; PostgreSQL's path is
//! `pg_record.rs`).

use rusqlite::params;

use super::encoded_attempt::{EncodedAttempt, SeriesRow};
use super::error::StoreError;
use crate::measure::UntetherMode;

/// Writes one attempt's rows, inside the caller's transaction. The `attempts` row goes first, and with `OR IGNORE`: an
/// attempt that is already there is a `Duplicate` before anything of it is written, so a
/// transaction of many attempts needs no savepoint for it (`batch::record`).
pub(super) fn insert_attempt(tx: &rusqlite::Transaction<'_>, a: &EncodedAttempt) -> Result<(), StoreError> {
    let inserted = tx
        .prepare_cached(
            "INSERT OR IGNORE INTO attempts (campaign, trial_idx, attempt, status, reasons, phases, started_at, ended_at,
            soak_start_s, artifact_dir, state_before, state_after, device, untether, labels, state_soak)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )?
        .execute(params![
            a.campaign,
            a.trial_idx,
            a.attempt,
            a.status.as_str(),
            a.reasons,
            a.phases,
            a.started_at,
            a.ended_at,
            a.soak_start_s,
            a.artifact_dir,
            a.state_before,
            a.state_after,
            a.device,
            a.untether.map(UntetherMode::as_str),
            a.labels,
            a.state_soak
        ])?;
    if inserted == 0 {
        return Err(StoreError::Duplicate { campaign: a.campaign.clone(), trial: a.trial_idx, attempt: a.attempt });
    }
    // Recorded, so no longer in flight (an agent's attempt): in the same transaction, so
    // that it is never both, nor neither.
    tx.prepare_cached("DELETE FROM attempts_in_flight WHERE campaign = ?1 AND trial_idx = ?2 AND attempt = ?3")?
        .execute(params![a.campaign, a.trial_idx, a.attempt])?;
    // The attempt's rows get consecutive ids (one connection writes them, in a row); its
    // `attempt_report` row holds their ranges.
    let mut measurements = None;
    {
        let mut st = tx.prepare_cached(
            "INSERT INTO measurements (campaign, trial_idx, attempt, seq, metric, value, unit, source)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for (seq, m) in a.measurements.iter().enumerate() {
            st.execute(params![a.campaign, a.trial_idx, a.attempt, seq as u32, m.metric, m.value, m.unit, m.source])?;
            let id = tx.last_insert_rowid();
            measurements = Some((measurements.map_or(id, |(from, _)| from), id));
        }
    }
    let mut series = None;
    {
        let mut st = tx.prepare_cached(
            "INSERT INTO series (campaign, trial_idx, attempt, seq, name, unit, source, points)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for (seq, s) in a.series.iter().enumerate() {
            st.execute(params![a.campaign, a.trial_idx, a.attempt, seq as u32, s.name, s.unit, s.source, s.points])?;
            let id = tx.last_insert_rowid();
            series = Some((series.map_or(id, |(from, _)| from), id));
        }
    }
    tx.prepare_cached(
        "INSERT INTO attempt_report (campaign, trial_idx, attempt, status, device, untether, soak_start_s, phases,
            reasons, labels, state_digest, battery, measurements_from, measurements_to, series_from, series_to)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    )?
    .execute(params![
        a.campaign,
        a.trial_idx,
        a.attempt,
        a.status.as_str(),
        a.device,
        a.untether.map(UntetherMode::as_str),
        a.soak_start_s,
        a.phases,
        a.reasons,
        a.labels,
        a.state_digest,
        a.series.iter().any(SeriesRow::is_battery),
        measurements.map(|(from, _)| from),
        measurements.map(|(_, to)| to),
        series.map(|(from, _)| from),
        series.map(|(_, to)| to)
    ])?;
    if !a.attestations.is_empty() {
        super::operator_steps::insert_attestations(tx, &a.campaign, a.trial_idx, a.attempt, &a.attestations)?;
    }
    Ok(())
}
