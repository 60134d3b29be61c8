//! `ColumnsReader`: a campaign's rows made into [`CampaignColumns`], whichever backend
//! they come from. SQLite feeds it borrowed text (`Store::read_columns_stamped`);
//! PostgreSQL feeds it through [`read_on_postgres`]: the trials and attempts on the
//! store's connection, the measurements by binary COPY on a second one in the same
//! snapshot. Both apply each row alike, so both give the columns
//! `CampaignColumns::from_records` gives.

use std::collections::HashSet;

use super::backend::{Conn, DbError, Dialect, PgOwner, Row, copy_text, float8, int8, vals};
use super::columns::{AttemptIn, CampaignColumns, Last, TrialIn, soak_seconds, strings};
use super::measurement_columns::{Collect, Measurements};
use super::operator_steps::AttemptAttestation;
use super::sqlite::{StoreError, outcome};
use super::state_digest::{Reading, StateDigest};
use crate::measure::UntetherMode;

/// One `attempt_report` row, borrowed.
pub(super) struct AttemptRow<'a> {
    pub idx: u32,
    pub attempt: u32,
    pub status: &'a str,
    pub device: Option<&'a str>,
    pub untether: Option<&'a str>,
    pub soak_start_s: f64,
    pub phases: &'a str,
    pub reasons: &'a str,
    pub labels: &'a str,
    pub digest: Option<&'a [u8]>,
    pub has_battery: bool,
}

/// Columns being filled: trials first, then attempts, then [`ColumnsReader::finish`].
#[derive(Default, Clone)]
pub(super) struct ColumnsReader {
    c: CampaignColumns,
    last: Last,
    /// The trial row the attempts have reached (both come in idx order).
    trial: usize,
    valid_of: Vec<u32>,
    attested: Vec<AttemptAttestation>,
    with_attestation: HashSet<(u32, u32)>,
    readings: Vec<Reading>,
}

impl ColumnsReader {
    pub fn trial(&mut self, t: TrialIn<'_>) {
        self.c.push_trial(&mut self.last, t);
    }

    /// The trials are all in; the attempts with attestations keep their whole digest.
    pub fn start_attempts(&mut self, attested: Vec<AttemptAttestation>) {
        self.with_attestation = attested.iter().map(|(k, _)| *k).collect();
        self.attested = attested;
        self.valid_of = vec![0; self.c.t_idx.len()];
        self.c.t_attempts = vec![0; self.c.t_idx.len()];
    }

    /// Adds one attempt, in (idx, attempt) order. `old_state` reads the state JSON of an
    /// attempt recorded before its digest was kept (or whose digest does not decode).
    pub fn attempt(
        &mut self,
        a: AttemptRow<'_>,
        old_state: impl FnOnce() -> Result<Option<StateDigest>, StoreError>,
    ) -> Result<(), StoreError> {
        let c = &mut self.c;
        // An attempt of a trial that is not planned is left out.
        while self.trial < c.t_idx.len() && c.t_idx[self.trial] < a.idx {
            self.trial += 1;
        }
        if self.trial == c.t_idx.len() || c.t_idx[self.trial] != a.idx {
            return Ok(());
        }
        let row = c.attempts() as u32;
        let valid = a.status == "valid";
        c.t_attempts[self.trial] += 1;
        self.valid_of[self.trial] += u32::from(valid);
        c.push_attempt(
            &mut self.last,
            AttemptIn {
                trial: self.trial as u32,
                attempt: a.attempt,
                valid,
                device: a.device,
                untether: a.untether.and_then(UntetherMode::parse),
                soak_start_s: a.soak_start_s,
                soak_s: soak_seconds(a.phases),
                has_battery: a.has_battery,
            },
        );
        if !valid {
            let reasons = strings(a.reasons);
            if !reasons.is_empty() {
                c.reasons.push((row, reasons));
            }
        }
        let labels = strings(a.labels);
        if !labels.is_empty() {
            c.labels.push((row, labels));
        }
        let keep = self.with_attestation.contains(&(a.idx, a.attempt));
        // A digest decodes without allocating.
        self.readings.clear();
        let readings = &mut self.readings;
        if !matches!(a.digest.map(|b| StateDigest::each_in_blob(b, |x| readings.push(x))), Some(Ok(()))) {
            readings.clear();
            if let Some(d) = old_state()? {
                readings.extend(d.readings);
            }
        }
        c.push_state(row as usize, self.readings.iter().copied(), keep);
        Ok(())
    }

    /// The columns, with their outcomes (the rule of `Store::trials`), attestations and
    /// measurements.
    pub fn finish(mut self, max_attempts: u32, measurements: Measurements) -> CampaignColumns {
        let c = &mut self.c;
        c.t_outcome = c.t_attempts.iter().zip(&self.valid_of).map(|(&n, &v)| outcome(n, v, max_attempts)).collect();
        let mut at = super::columns::Cursor { i: 0 };
        for (key, x) in self.attested {
            if let Some(row) = at.seek(c, key) {
                c.attestations.push((row as u32, x));
            }
        }
        measurements.place(c);
        self.c
    }
}

/// A text column, borrowed from a [`Row`].
fn text(r: &Row, i: usize) -> Result<&str, DbError> {
    r.text(i)?.ok_or_else(|| DbError::Type(format!("column {i} is NULL")))
}

/// Campaign `id` as columns and its report stamp, read on `c` alone in one snapshot: on
/// SQLite, a check of its borrowed, parallel read (tests read both ways).
#[cfg(test)]
pub(super) fn read_on(c: &mut dyn Conn, id: &str) -> Result<(CampaignColumns, String), StoreError> {
    c.begin_read()?;
    let out = read_in(c, id);
    // Nothing was written: ending it either way is the same.
    let end = c.rollback();
    let out = out?;
    end?;
    Ok(out)
}

#[cfg(test)]
fn read_in(c: &mut dyn Conn, id: &str) -> Result<(CampaignColumns, String), StoreError> {
    let (max_attempts, stamp, reader) = read_rows(c, id)?;
    let measurements = read_measurements(c, id)?;
    Ok((reader.finish(max_attempts, measurements), stamp))
}

/// Campaign `id` as columns and its report stamp, on PostgreSQL: the measurements are
/// read on a second connection of their own, in the same snapshot (exported by the first
/// one's transaction), while the first reads the trials and attempts, as SQLite's read
/// does on two threads. Without a second connection, the first reads them after.
pub(super) fn read_on_postgres(owner: &PgOwner, id: &str) -> Result<(CampaignColumns, String), StoreError> {
    let snapshot: String = owner.call(|c| {
        c.begin_read()?;
        c.query_opt("SELECT pg_export_snapshot()", &[])?.ok_or_else(|| DbError::Type("no snapshot".into()))?.get(0)
    })?;
    let (imported, in_snapshot) = std::sync::mpsc::channel::<()>();
    let (url, id2) = (owner.url().named("lab-read"), id.to_string());
    let fetch = std::thread::spawn(move || -> Result<Measurements, StoreError> {
        let second = PgOwner::connect(&url)?;
        second.call(move |c| {
            c.batch(&format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '{}'",
                snapshot.replace('\'', "''")
            ))
        })?;
        let _ = imported.send(());
        second.call(move |c| Ok(read_measurements(c, &id2)))?
    });
    let id1 = id.to_string();
    let rows = owner.call(move |c| Ok(read_rows(c, &id1)));
    // The snapshot lives as long as the transaction that exported it: not ended before
    // the second connection took it (or failed to).
    let parallel = in_snapshot.recv().is_ok();
    let measurements = match (&rows, parallel) {
        (Ok(Ok(_)), true) => {
            fetch.join().unwrap_or_else(|_| Err(StoreError::Internal("reading measurements panicked".into())))
        }
        (Ok(Ok(_)), false) => {
            let id1 = id.to_string();
            owner.call(move |c| Ok(read_measurements(c, &id1)))?
        }
        _ => Ok(Measurements::default()),
    };
    let _ = owner.call(|c| c.rollback());
    let (max_attempts, stamp, reader) = rows??;
    Ok((reader.finish(max_attempts, measurements?), stamp))
}

/// The trials, attestations and attempts of campaign `id` fed to a reader: (the
/// campaign's attempt limit, its report stamp, the reader).
fn read_rows(c: &mut dyn Conn, id: &str) -> Result<(u32, String, ColumnsReader), StoreError> {
    let max_attempts: u32 = c
        .query_opt("SELECT max_attempts FROM campaigns WHERE id = ?1", &vals![id])?
        .ok_or_else(|| StoreError::NoCampaign(id.into()))?
        .get(0)?;
    let stamp = super::sqlite::report_stamp_on(c, id)?;
    let mut r = ColumnsReader::default();
    c.query_each(
        "SELECT idx, key, device, device_model, variant, build, config, repeat, block, device_order
         FROM trials WHERE campaign = ?1 ORDER BY idx",
        &vals![id],
        &mut |row| {
            r.trial(TrialIn {
                idx: row.get(0)?,
                key: text(&row, 1)?,
                device: text(&row, 2)?,
                model: text(&row, 3)?,
                variant: text(&row, 4)?,
                build: text(&row, 5)?,
                config: text(&row, 6)?,
                repeat: row.get(7)?,
                block: row.get(8)?,
                order: row.get(9)?,
            });
            Ok(())
        },
    )?;
    r.start_attempts(super::operator_steps::attestation_rows(c, id)?);
    // Held, not streamed: an old attempt's state is read on the same connection.
    let attempts = c.query(
        "SELECT trial_idx, attempt, status, device, untether, soak_start_s, phases, reasons, labels, state_digest,
            battery
         FROM attempt_report WHERE campaign = ?1 ORDER BY trial_idx, attempt",
        &vals![id],
    )?;
    for row in &attempts {
        let (idx, attempt): (u32, u32) = (row.get(0)?, row.get(1)?);
        let a = AttemptRow {
            idx,
            attempt,
            status: text(row, 2)?,
            device: row.text(3)?,
            untether: row.text(4)?,
            soak_start_s: row.get(5)?,
            phases: text(row, 6)?,
            reasons: text(row, 7)?,
            labels: text(row, 8)?,
            digest: row.blob(9),
            has_battery: row.get(10)?,
        };
        r.attempt(a, || {
            let old = c.query_opt(
                "SELECT state_before, state_soak, state_after FROM attempts
                 WHERE campaign = ?1 AND trial_idx = ?2 AND attempt = ?3",
                &vals![id, idx, attempt],
            )?;
            Ok(match old {
                Some(j) => Some(StateDigest::from_text(text(&j, 0)?, j.text(1)?, text(&j, 2)?)),
                None => None,
            })
        })?;
    }
    drop(attempts);
    Ok((max_attempts, stamp, r))
}

/// Campaign `id`'s measurements by id range, as the SQLite path reads them
/// (`measurement_columns`).
fn read_measurements(c: &mut dyn Conn, id: &str) -> Result<Measurements, StoreError> {
    let range = c.query_opt(
        "SELECT min(measurements_from), max(measurements_to) FROM attempt_report WHERE campaign = ?1",
        &vals![id],
    )?;
    let mut collect = Collect::default();
    if let Some(range) = range
        && let (Some(lo), Some(hi)) = (range.get::<Option<i64>>(0)?, range.get::<Option<i64>>(1)?)
    {
        let select = "SELECT trial_idx, attempt, seq, metric, value, unit, source FROM measurements
             WHERE id BETWEEN ?2 AND ?3 AND campaign = ?1";
        if c.dialect() == Dialect::Postgres {
            // COPY: the rows in large binary chunks, no value or string per field. It takes
            // no parameters: the id is written as a literal, its quotes doubled.
            let query = select
                .replace("?1", &format!("'{}'", id.replace('\'', "''")))
                .replace("?2", &lo.to_string())
                .replace("?3", &hi.to_string());
            c.copy_out(&query, &mut |f| {
                if f.len() != 7 {
                    return Err(DbError::Type(format!("COPY data: {} fields for 7", f.len())));
                }
                let key = (int8(f[0])? as u32, int8(f[1])? as u32);
                collect.push(
                    key,
                    int8(f[2])? as u32,
                    copy_text(f[3])?,
                    float8(f[4])?,
                    copy_text(f[5])?,
                    copy_text(f[6])?,
                );
                Ok(())
            })?;
        } else {
            c.query_each(select, &vals![id, lo, hi], &mut |row| {
                collect.push(
                    (row.get(0)?, row.get(1)?),
                    row.get(2)?,
                    text(&row, 3)?,
                    row.get(4)?,
                    text(&row, 5)?,
                    text(&row, 6)?,
                );
                Ok(())
            })?;
        }
    }
    Ok(collect.done())
}
