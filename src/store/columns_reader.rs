//! `ColumnsReader`: a campaign's rows made into [`CampaignColumns`], whichever backend
//! they come from. SQLite feeds it borrowed text (`Store::read_columns_stamped`);
//! PostgreSQL feeds it through [`read_on_postgres`]: the trials and attempts on the
//! store's connection, the measurements by binary COPY on a second one in the same
//! snapshot. Both apply each row alike, so both give the columns
//! `CampaignColumns::from_records` gives.

use std::collections::HashSet;

use super::backend::{
    Columns, Conn, DbError, Dialect, FromRow, PgOwner, PgUrl, Row, connect_async, copy_out_async, copy_text, float8,
    int8, on_own_runtime, placeholders, vals,
};
use super::campaigns::outcome;
use super::columns::{AttemptIn, CampaignColumns, Last, TrialIn, soak_seconds, strings};
use super::error::StoreError;
use super::measurement_columns::{Collect, Measurements};
use super::operator_steps::AttemptAttestation;
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

/// From an [`ATTEMPTS`] row.
impl<'r> FromRow<'r> for AttemptRow<'r> {
    fn from_row(c: &mut Columns<'r>) -> Result<Self, DbError> {
        Ok(AttemptRow {
            idx: c.get()?,
            attempt: c.get()?,
            status: c.str()?,
            device: c.text()?,
            untether: c.text()?,
            soak_start_s: c.get()?,
            phases: c.str()?,
            reasons: c.str()?,
            labels: c.str()?,
            digest: c.blob(),
            has_battery: c.get()?,
        })
    }
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

/// Campaign `id` as columns and its report stamp, on PostgreSQL, on three connections
/// in one snapshot (exported by the store connection's transaction): a second one reads
/// the measurements by binary COPY and a third the trials and attempts, while the
/// store's own reads the campaign's head (and an old attempt's state, when one has no
/// digest), as SQLite's read does on two threads. Whatever a second or third connection
/// could not read, the first reads after.
pub(super) fn read_on_postgres(owner: &PgOwner, id: &str) -> Result<(CampaignColumns, String), StoreError> {
    let snapshot: String = owner.call(|c| {
        c.begin_read()?;
        c.query_opt("SELECT pg_export_snapshot()", &[])?.ok_or_else(|| DbError::Type("no snapshot".into()))?.read()
    })?;
    let url = owner.url().named("lab-read");
    let id2 = id.to_string();
    let measurements = in_snapshot(url.clone(), snapshot.clone(), move |client| async move {
        let range = client.query_one(&placeholders(MEASUREMENT_RANGE), &[&id2]).await.map_err(DbError::from)?;
        let mut collect = Collect::default();
        if let (Some(lo), Some(hi)) = (
            range.try_get::<_, Option<i64>>(0).map_err(DbError::from)?,
            range.try_get::<_, Option<i64>>(1).map_err(DbError::from)?,
        ) {
            copy_out_async(&client, &measurements_copy(&id2, lo, hi), &mut |f| push_copy_row(&mut collect, f)).await?;
        }
        Ok(collect.done())
    });
    let id3 = id.to_string();
    let mut fetched = Some(in_snapshot(url, snapshot, move |client| async move {
        let trials = client.query(&placeholders(TRIALS), &[&id3]).await.map_err(DbError::from)?;
        let attempts = client.query(&placeholders(ATTEMPTS), &[&id3]).await.map_err(DbError::from)?;
        Ok((trials, attempts))
    }));
    let id1 = id.to_string();
    let rows = owner.call(move |c| {
        Ok((|| -> Result<(u32, String, ColumnsReader), StoreError> {
            let max_attempts = max_attempts(c, &id1)?;
            let attested = super::operator_steps::attestation_rows(c, &id1)?;
            let mut r = ColumnsReader::default();
            let stamp = match fetched.take().map(|t| t.join()) {
                Some(Ok(Ok((trials, attempts)))) => {
                    // The stamp's counts from the rows read, as `report_stamp_on` counts
                    // them: no second scan of either table.
                    let head = super::campaigns::stamp_head(c, &id1)?;
                    let mut moved = Vec::new();
                    for row in &trials {
                        let t = trial_of(row)?;
                        if row.try_get::<_, bool>(10).map_err(DbError::from)? {
                            moved.push(format!("{}:{}:{}", t.idx, t.device, t.order));
                        }
                        r.trial(t);
                    }
                    let mut newest: Option<i64> = None;
                    for row in &attempts {
                        newest = newest.max(row.try_get::<_, Option<i64>>(11).map_err(DbError::from)?);
                    }
                    let stamp = super::campaigns::stamp_text(
                        &head,
                        trials.len() as u64,
                        &moved.join(","),
                        attempts.len() as u64,
                        newest,
                    );
                    drop(trials);
                    read_attempts(c, &id1, &mut r, attested, attempts.iter().map(attempt_of_pg))?;
                    stamp
                }
                _ => {
                    let stamp = super::campaigns::report_stamp_on(c, &id1)?;
                    read_trials(c, &id1, &mut r)?;
                    let attempts = c.query(ATTEMPTS, &vals![id1.as_str()])?;
                    read_attempts(c, &id1, &mut r, attested, attempts.iter().map(Row::read))?;
                    stamp
                }
            };
            Ok((max_attempts, stamp, r))
        })())
    });
    // The snapshot lives as long as the transaction that exported it: still open here.
    let measurements = match &rows {
        Ok(Ok(_)) => match measurements.join() {
            Ok(Ok(m)) => Ok(m),
            _ => {
                let id1 = id.to_string();
                owner.call(move |c| Ok(read_measurements(c, &id1)))?
            }
        },
        _ => Ok(Measurements::default()),
    };
    let _ = owner.call(|c| c.rollback());
    let (max_attempts, stamp, reader) = rows??;
    Ok((reader.finish(max_attempts, measurements?), stamp))
}

/// `work` on a new connection to `url` (the async client, on a thread of its own) in
/// the exported `snapshot`: a whole result read in one runtime call (the sync client
/// enters its runtime once a message, and COPY sends a message a row).
fn in_snapshot<T, F, Fut>(url: PgUrl, snapshot: String, work: F) -> std::thread::JoinHandle<Result<T, StoreError>>
where
    T: Send + 'static,
    F: FnOnce(tokio_postgres::Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    std::thread::spawn(move || {
        on_own_runtime(async move {
            let client = connect_async(&url).await?;
            client
                .batch_execute(&format!(
                    "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '{}'",
                    snapshot.replace('\'', "''")
                ))
                .await
                .map_err(DbError::from)?;
            work(client).await
        })
        .unwrap_or_else(|e| Err(StoreError::Internal(format!("a runtime for a read connection: {e}"))))
    })
}

/// A campaign's trials; the last column is for its report stamp (`report_stamp_on`).
const TRIALS: &str = "SELECT idx, key, device, device_model, variant, build, config, repeat, block, device_order,
        moved_from IS NOT NULL
     FROM trials WHERE campaign = ?1 ORDER BY idx";

/// A campaign's attempts; the last column is for its report stamp on PostgreSQL.
const ATTEMPTS: &str = "SELECT trial_idx, attempt, status, device, untether, soak_start_s, phases, reasons, labels,
        state_digest, battery, measurements_to
     FROM attempt_report WHERE campaign = ?1 ORDER BY trial_idx, attempt";

/// A [`TRIALS`] row of the async client.
fn trial_of(row: &tokio_postgres::Row) -> Result<TrialIn<'_>, DbError> {
    let int = |i: usize| row.try_get::<_, i64>(i).map(|v| v as u32);
    Ok(TrialIn {
        idx: int(0)?,
        key: row.try_get(1)?,
        device: row.try_get(2)?,
        model: row.try_get(3)?,
        variant: row.try_get(4)?,
        build: row.try_get(5)?,
        config: row.try_get(6)?,
        repeat: int(7)?,
        block: int(8)?,
        order: int(9)?,
    })
}

/// The trials, attestations and attempts of campaign `id` fed to a reader: (the
/// campaign's attempt limit, its report stamp, the reader).
#[cfg(test)]
fn read_rows(c: &mut dyn Conn, id: &str) -> Result<(u32, String, ColumnsReader), StoreError> {
    let (max_attempts, stamp) = (max_attempts(c, id)?, super::campaigns::report_stamp_on(c, id)?);
    let mut r = ColumnsReader::default();
    read_trials(c, id, &mut r)?;
    let attested = super::operator_steps::attestation_rows(c, id)?;
    let attempts = c.query(ATTEMPTS, &vals![id])?;
    read_attempts(c, id, &mut r, attested, attempts.iter().map(Row::read))?;
    Ok((max_attempts, stamp, r))
}

/// Campaign `id`'s attempt limit.
fn max_attempts(c: &mut dyn Conn, id: &str) -> Result<u32, StoreError> {
    Ok(c.query_opt("SELECT max_attempts FROM campaigns WHERE id = ?1", &vals![id])?
        .ok_or_else(|| StoreError::NoCampaign(id.into()))?
        .read()?)
}

/// Campaign `id`'s trials, in order, into `r`.
fn read_trials(c: &mut dyn Conn, id: &str, r: &mut ColumnsReader) -> Result<(), StoreError> {
    c.query_each(TRIALS, &vals![id], &mut |row| {
        r.trial(row.read::<TrialIn>()?);
        Ok(())
    })?;
    Ok(())
}

/// The [`ATTEMPTS`] rows of campaign `id` into `r`, its trials being in: an old
/// attempt's state is read on `c`.
fn read_attempts<'r>(
    c: &mut dyn Conn,
    id: &str,
    r: &mut ColumnsReader,
    attested: Vec<AttemptAttestation>,
    attempts: impl Iterator<Item = Result<AttemptRow<'r>, DbError>>,
) -> Result<(), StoreError> {
    r.start_attempts(attested);
    for a in attempts {
        let a = a?;
        let (idx, attempt) = (a.idx, a.attempt);
        r.attempt(a, || {
            let old = c.query_opt(
                "SELECT state_before, state_soak, state_after FROM attempts
                 WHERE campaign = ?1 AND trial_idx = ?2 AND attempt = ?3",
                &vals![id, idx, attempt],
            )?;
            Ok(match old {
                Some(j) => {
                    let mut c = Columns::new(&j);
                    Some(StateDigest::from_text(c.str()?, c.text()?, c.str()?))
                }
                None => None,
            })
        })?;
    }
    Ok(())
}

/// An [`ATTEMPTS`] row of the async client.
fn attempt_of_pg(row: &tokio_postgres::Row) -> Result<AttemptRow<'_>, DbError> {
    Ok(AttemptRow {
        idx: row.try_get::<_, i64>(0)? as u32,
        attempt: row.try_get::<_, i64>(1)? as u32,
        status: row.try_get(2)?,
        device: row.try_get(3)?,
        untether: row.try_get(4)?,
        soak_start_s: row.try_get(5)?,
        phases: row.try_get(6)?,
        reasons: row.try_get(7)?,
        labels: row.try_get(8)?,
        digest: row.try_get(9)?,
        has_battery: row.try_get::<_, i64>(10)? != 0,
    })
}

/// The id range of campaign `id`'s measurements (`?1` / `$1`: its id).
const MEASUREMENT_RANGE: &str =
    "SELECT min(measurements_from), max(measurements_to) FROM attempt_report WHERE campaign = ?1";

/// Campaign `id`'s measurements by id range, as the SQLite path reads them
/// (`measurement_columns`).
fn read_measurements(c: &mut dyn Conn, id: &str) -> Result<Measurements, StoreError> {
    let range = c.query_opt(MEASUREMENT_RANGE, &vals![id])?;
    let mut collect = Collect::default();
    if let Some(range) = range
        && let (Some(lo), Some(hi)) = range.read::<(Option<i64>, Option<i64>)>()?
    {
        if c.dialect() == Dialect::Postgres {
            c.copy_out(&measurements_copy(id, lo, hi), &mut |f| push_copy_row(&mut collect, f))?;
        } else {
            c.query_each(
                "SELECT trial_idx, attempt, seq, metric, value, unit, source FROM measurements
                 WHERE id BETWEEN ?2 AND ?3 AND campaign = ?1",
                &vals![id, lo, hi],
                &mut |row| {
                    let mut c = Columns::new(&row);
                    collect.push(c.read()?, c.get()?, c.str()?, c.get()?, c.str()?, c.str()?);
                    Ok(())
                },
            )?;
        }
    }
    Ok(collect.done())
}

/// The query whose binary COPY gives campaign `id`'s measurements with ids `lo..=hi`:
/// rows in large chunks, no value or string per field. COPY takes no parameters: the id
/// is written as a literal, its quotes doubled.
fn measurements_copy(id: &str, lo: i64, hi: i64) -> String {
    format!(
        "SELECT trial_idx, attempt, seq, metric, value, unit, source FROM measurements
         WHERE id BETWEEN {lo} AND {hi} AND campaign = '{}'",
        id.replace('\'', "''")
    )
}

/// One row of [`measurements_copy`]'s COPY into `collect`.
fn push_copy_row(collect: &mut Collect, f: &[Option<&[u8]>]) -> Result<(), DbError> {
    if f.len() != 7 {
        return Err(DbError::Type(format!("COPY data: {} fields for 7", f.len())));
    }
    let key = (int8(f[0])? as u32, int8(f[1])? as u32);
    collect.push(key, int8(f[2])? as u32, copy_text(f[3])?, float8(f[4])?, copy_text(f[5])?, copy_text(f[6])?);
    Ok(())
}
