//! Recording attempts on PostgreSQL: what `batch::record` and `insert_attempt` do on
//! SQLite, with PostgreSQL's bulk path. One transaction per batch of attempts, each in a
//! savepoint when one of them fails; measurements and series go in as multi-row inserts
//! that return their ids. An attempt's `attempt_report` row holds the id ranges of its
//! rows, so they must be consecutive: the transaction takes an advisory lock first, and
//! recorders of other processes take turns (their transactions are short).

use super::backend::{Conn, DbError, Value, vals};
use super::batch::Ticket;
use super::encoded_attempt::{EncodedAttempt, SeriesRow};
use super::sqlite::StoreError;
use crate::measure::UntetherMode;

/// The key of the advisory lock recording transactions take.
pub(super) const RECORD_LOCK: i64 = 0x006c_6162_5f72_6563; // "lab_rec"

/// Rows per multi-row insert (PostgreSQL takes at most 65 535 parameters).
const CHUNK: usize = 1000;

/// Records `jobs` in one transaction (each in a savepoint if one fails), and hands each
/// ticket its result; the number of commits.
pub(super) fn record(c: &mut dyn Conn, jobs: Vec<(EncodedAttempt, Ticket)>) -> u64 {
    let mut results: Vec<Result<(), StoreError>> = Vec::with_capacity(jobs.len());
    let committed = (|| -> Result<(), StoreError> {
        c.begin()?;
        let body = (|| -> Result<(), StoreError> {
            c.execute("SELECT pg_advisory_xact_lock(?1)", &vals![RECORD_LOCK])?;
            for (a, _) in &jobs {
                c.batch("SAVEPOINT attempt")?;
                let r = insert_attempt(c, a);
                if r.is_err() {
                    c.batch("ROLLBACK TO SAVEPOINT attempt")?;
                }
                c.batch("RELEASE SAVEPOINT attempt")?;
                results.push(r);
            }
            Ok(())
        })();
        match body {
            Ok(()) => Ok(c.commit()?),
            Err(e) => {
                let _ = c.rollback();
                Err(e)
            }
        }
    })();
    super::batch::hand_out(jobs, committed, results)
}

fn insert_attempt(c: &mut dyn Conn, a: &EncodedAttempt) -> Result<(), StoreError> {
    let untether = a.untether.map(UntetherMode::as_str);
    let inserted = c.execute(
        "INSERT INTO attempts (campaign, trial_idx, attempt, status, reasons, phases, started_at, ended_at,
            soak_start_s, artifact_dir, state_before, state_after, device, untether, labels, state_soak)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) ON CONFLICT DO NOTHING",
        &vals![
            &a.campaign,
            a.trial_idx,
            a.attempt,
            a.status.as_str(),
            &a.reasons,
            &a.phases,
            &a.started_at,
            &a.ended_at,
            a.soak_start_s,
            &a.artifact_dir,
            &a.state_before,
            &a.state_after,
            &a.device,
            untether,
            &a.labels,
            a.state_soak.clone()
        ],
    )?;
    if inserted == 0 {
        return Err(StoreError::Duplicate { campaign: a.campaign.clone(), trial: a.trial_idx, attempt: a.attempt });
    }
    let key = || vals![&a.campaign, a.trial_idx, a.attempt];
    let measurements = insert_rows(
        c,
        "measurements (campaign, trial_idx, attempt, seq, metric, value, unit, source)",
        a.measurements.iter().enumerate().map(|(seq, m)| {
            let mut row = key().to_vec();
            row.extend(vals![seq as u32, &m.metric, m.value, &m.unit, &m.source]);
            row
        }),
    )?;
    let series = insert_rows(
        c,
        "series (campaign, trial_idx, attempt, seq, name, unit, source, points)",
        a.series.iter().enumerate().map(|(seq, s)| {
            let mut row = key().to_vec();
            row.extend(vals![seq as u32, &s.name, &s.unit, &s.source, s.points.clone()]);
            row
        }),
    )?;
    c.execute(
        "INSERT INTO attempt_report (campaign, trial_idx, attempt, status, device, untether, soak_start_s, phases,
            reasons, labels, state_digest, battery, measurements_from, measurements_to, series_from, series_to)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        &vals![
            &a.campaign,
            a.trial_idx,
            a.attempt,
            a.status.as_str(),
            &a.device,
            untether,
            a.soak_start_s,
            &a.phases,
            &a.reasons,
            &a.labels,
            a.state_digest.clone(),
            a.series.iter().any(SeriesRow::is_battery),
            measurements.map(|(from, _)| from),
            measurements.map(|(_, to)| to),
            series.map(|(from, _)| from),
            series.map(|(_, to)| to)
        ],
    )?;
    for (seq, x) in a.attestations.iter().enumerate() {
        let mut row = key().to_vec();
        row.extend(vals![seq as u32, &x.step, &x.when, &x.text, &x.by, &x.at, serde_json::to_string(&x.values)?]);
        c.execute(
            "INSERT INTO attestations (campaign, trial_idx, attempt, seq, step, step_when, text, answered_by,
                answered_at, answer)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            &row,
        )?;
    }
    Ok(())
}

/// Inserts `rows` into `table (columns)`, `CHUNK` rows a statement; the first and last id
/// given (consecutive: the recording lock is held).
fn insert_rows(
    c: &mut dyn Conn,
    table: &str,
    rows: impl Iterator<Item = Vec<Value>>,
) -> Result<Option<(i64, i64)>, DbError> {
    let rows: Vec<Vec<Value>> = rows.collect();
    let mut range: Option<(i64, i64)> = None;
    for chunk in rows.chunks(CHUNK) {
        let width = chunk[0].len();
        let values: Vec<String> = (0..chunk.len())
            .map(|r| {
                let cells: Vec<String> = (1..=width).map(|k| format!("?{}", r * width + k)).collect();
                format!("({})", cells.join(", "))
            })
            .collect();
        let sql = format!("INSERT INTO {table} VALUES {} RETURNING id", values.join(", "));
        let params: Vec<Value> = chunk.iter().flatten().cloned().collect();
        for r in c.query(&sql, &params)? {
            let id: i64 = r.get(0)?;
            range = Some(range.map_or((id, id), |(from, to)| (from.min(id), to.max(id))));
        }
    }
    Ok(range)
}
