//! Recording attempts on PostgreSQL: what `batch::record` and `insert_attempt` do on
//! SQLite, with PostgreSQL's bulk path. One transaction per batch of attempts, each in a
//! savepoint when one of them fails; measurements and series go in as multi-row inserts
//! that return their ids. An attempt's `attempt_report` row holds the id ranges of its
//! rows, so they must be consecutive: a batch reserves its ids in one statement of its
//! own under an advisory lock, held for that statement only, so recorders of other
//! processes take turns for a moment, not for a whole transaction. A recorded attempt's
//! `attempts_in_flight` row goes in the same transaction.

use super::backend::{Conn, DbError, Value, vals};
use super::batch::Ticket;
use super::encoded_attempt::{EncodedAttempt, SeriesRow};
use super::error::StoreError;
use crate::measure::UntetherMode;

/// The key of the advisory lock recording transactions take.
pub(super) const RECORD_LOCK: i64 = 0x006c_6162_5f72_6563; // "lab_rec"

/// Rows per multi-row insert (PostgreSQL takes at most 65 535 parameters).
const CHUNK: usize = 1000;

/// Records `jobs` in one transaction, and hands each ticket its result; the number of
/// commits. The whole batch goes in a handful of statements ([`record_together`]); if any
/// of them fails, the batch again attempt by attempt, each in a savepoint, so that an
/// attempt refused on its own fails alone.
pub(super) fn record(c: &mut dyn Conn, jobs: Vec<(EncodedAttempt, Ticket)>) -> u64 {
    match record_in_one(c, &jobs) {
        Ok(true) => {
            let all_ok = jobs_ok(jobs.len());
            return super::batch::hand_out(jobs, Ok(()), all_ok);
        }
        Err(e @ StoreError::Unreachable(_)) => return super::batch::hand_out(jobs, Err(e), Vec::new()),
        // Too big for one statement, or refused (a duplicate among them): as below.
        Ok(false) | Err(_) => {}
    }
    match record_together(c, &jobs) {
        Ok(results) => super::batch::hand_out(jobs, Ok(()), results),
        // The connection is gone: every attempt is told, and the recorder tries again.
        Err(e @ StoreError::Unreachable(_)) => super::batch::hand_out(jobs, Err(e), Vec::new()),
        Err(_) => record_one_by_one(c, jobs),
    }
}

fn jobs_ok(n: usize) -> Vec<Result<(), StoreError>> {
    (0..n).map(|_| Ok(())).collect()
}

/// At most this many parameters in [`record_in_one`]'s statement (PostgreSQL takes 65 535).
const ONE_STATEMENT_PARAMS: usize = 30_000;

/// The whole batch in one statement after the ids' reservation, its inserts and the
/// in-flight rows' removal as data-modifying `WITH`s (the foreign keys are checked at the
/// statement's end, when its attempts are in): two round trips a batch rather than a dozen
/// (a statement this long is prepared for each use), the common case, where no attempt is
/// there already. A duplicate fails the whole statement, which then changed nothing, and
/// `false` means too many parameters: either way [`record_together`] sorts them out.
fn record_in_one(c: &mut dyn Conn, jobs: &[(EncodedAttempt, Ticket)]) -> Result<bool, StoreError> {
    let attempts: Vec<&EncodedAttempt> = jobs.iter().map(|(a, _)| a).collect();
    // Per attempt: its row (16), its report's (16), its key for the removal (3), and the
    // rows of its measurements (9), series (9) and attestations (10).
    let params: usize =
        attempts.iter().map(|a| 35 + 9 * a.measurements.len() + 9 * a.series.len() + 10 * a.attestations.len()).sum();
    if params > ONE_STATEMENT_PARAMS || attempts.is_empty() {
        return Ok(false);
    }
    let next =
        reserve(c, attempts.iter().map(|a| a.measurements.len()).sum(), attempts.iter().map(|a| a.series.len()).sum())?;
    let Rows { measurements: m_rows, series: s_rows, reports, attested } = rows(&attempts, next)?;
    let mut params: Vec<Value> = Vec::with_capacity(params);
    let mut parts: Vec<String> = Vec::new();
    // Each part's placeholders numbered after those before it.
    let mut add = |head: &str, rows: Vec<Vec<Value>>| {
        let Some(w) = rows.first().map(Vec::len) else { return };
        let at = params.len();
        let values: Vec<String> = (0..rows.len())
            .map(|r| format!("({})", (1..=w).map(|k| format!("?{}", at + r * w + k)).collect::<Vec<_>>().join(", ")))
            .collect();
        parts.push(format!("{head} VALUES {}", values.join(", ")));
        params.extend(rows.into_iter().flatten());
    };
    add(
        "INSERT INTO attempts (campaign, trial_idx, attempt, status, reasons, phases, started_at, ended_at,
            soak_start_s, artifact_dir, state_before, state_after, device, untether, labels, state_soak)",
        attempts.iter().map(|a| attempt_row(a)).collect(),
    );
    add("INSERT INTO measurements (id, campaign, trial_idx, attempt, seq, metric, value, unit, source)", m_rows);
    add("INSERT INTO series (id, campaign, trial_idx, attempt, seq, name, unit, source, points)", s_rows);
    add(&format!("INSERT INTO {REPORT_COLUMNS}"), reports);
    add(&format!("INSERT INTO {ATTESTATION_COLUMNS}"), attested);
    let at = params.len();
    let gone: Vec<String> = (0..attempts.len())
        .map(|i| format!("(?{}, ?{}, ?{})", at + 3 * i + 1, at + 3 * i + 2, at + 3 * i + 3))
        .collect();
    parts.push(format!("DELETE FROM attempts_in_flight WHERE (campaign, trial_idx, attempt) IN ({})", gone.join(", ")));
    params.extend(attempts.iter().flat_map(|a| key(a)));
    let with: Vec<String> = parts.iter().enumerate().map(|(i, p)| format!("w{i} AS ({p})")).collect();
    c.execute(&format!("WITH {} SELECT 1", with.join(", ")), &params)?;
    Ok(true)
}

/// The batch in one transaction of a few multi-row statements: the attempts' rows (those
/// already recorded are refused as duplicates), ids reserved for all their measurements
/// and series at once, then those rows, the report rows with their id ranges, and the
/// attestations. Round trips per batch, not per attempt: recording is one thread that
/// every device waits on.
fn record_together(
    c: &mut dyn Conn,
    jobs: &[(EncodedAttempt, Ticket)],
) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    // Before the transaction: its lock ends with this statement. Ids of attempts that turn
    // out duplicates are left unused (a gap, as a rolled-back insert leaves).
    let next = reserve(
        c,
        jobs.iter().map(|(a, _)| a.measurements.len()).sum(),
        jobs.iter().map(|(a, _)| a.series.len()).sum(),
    )?;
    c.begin()?;
    let body = (|| -> Result<Vec<Result<(), StoreError>>, StoreError> {
        let mut inserted = std::collections::HashSet::new();
        for chunk in jobs.chunks(CHUNK / 16) {
            let rows: Vec<Vec<Value>> = chunk.iter().map(|(a, _)| attempt_row(a)).collect();
            let sql = multi_row(
                "INSERT INTO attempts (campaign, trial_idx, attempt, status, reasons, phases, started_at, ended_at,
                    soak_start_s, artifact_dir, state_before, state_after, device, untether, labels, state_soak)",
                rows.len(),
                16,
                " ON CONFLICT DO NOTHING RETURNING campaign, trial_idx, attempt",
            );
            for r in c.query(&sql, &rows.concat())? {
                inserted.insert(r.read::<(String, u32, u32)>()?);
            }
        }
        // Each inserted attempt once: a second copy of one in the batch is a duplicate too.
        let mut results = Vec::with_capacity(jobs.len());
        let mut fresh: Vec<&EncodedAttempt> = Vec::new();
        for (a, _) in jobs {
            if inserted.remove(&(a.campaign.clone(), a.trial_idx, a.attempt)) {
                fresh.push(a);
                results.push(Ok(()));
            } else {
                results.push(Err(StoreError::Duplicate {
                    campaign: a.campaign.clone(),
                    trial: a.trial_idx,
                    attempt: a.attempt,
                }));
            }
        }
        if !fresh.is_empty() {
            let keys: Vec<Value> = fresh.iter().flat_map(|a| key(a)).collect();
            let sql = format!(
                "DELETE FROM attempts_in_flight WHERE (campaign, trial_idx, attempt) IN ({})",
                (0..fresh.len())
                    .map(|i| format!("(?{}, ?{}, ?{})", 3 * i + 1, 3 * i + 2, 3 * i + 3))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            c.execute(&sql, &keys)?;
        }
        let Rows { measurements: m_rows, series: s_rows, reports, attested } = rows(&fresh, next)?;
        insert_all(c, "measurements (id, campaign, trial_idx, attempt, seq, metric, value, unit, source)", m_rows)?;
        insert_all(c, "series (id, campaign, trial_idx, attempt, seq, name, unit, source, points)", s_rows)?;
        insert_all(c, REPORT_COLUMNS, reports)?;
        insert_all(c, ATTESTATION_COLUMNS, attested)?;
        Ok(results)
    })();
    match body {
        Ok(results) => {
            c.commit()?;
            Ok(results)
        }
        Err(e) => {
            let _ = c.rollback();
            Err(e)
        }
    }
}

/// The rows that go with attempts besides their own, ids given from the reserved ones.
struct Rows {
    measurements: Vec<Vec<Value>>,
    series: Vec<Vec<Value>>,
    reports: Vec<Vec<Value>>,
    attested: Vec<Vec<Value>>,
}

/// [`Rows`] of `attempts`, their measurements' and series' ids from `(m_next, s_next)` on,
/// each attempt's consecutive.
fn rows(attempts: &[&EncodedAttempt], (mut m_next, mut s_next): (i64, i64)) -> Result<Rows, StoreError> {
    let mut out = Rows { measurements: Vec::new(), series: Vec::new(), reports: Vec::new(), attested: Vec::new() };
    for a in attempts {
        let m = span(&mut m_next, a.measurements.len());
        let sr = span(&mut s_next, a.series.len());
        for (i, row) in measurement_rows(a).enumerate() {
            out.measurements.push([vals![m.map_or(0, |(from, _)| from + i as i64)].to_vec(), row].concat());
        }
        for (i, row) in series_rows(a).enumerate() {
            out.series.push([vals![sr.map_or(0, |(from, _)| from + i as i64)].to_vec(), row].concat());
        }
        out.reports.push(report_row(a, m, sr));
        out.attested.extend(attestation_rows(a)?);
    }
    Ok(out)
}

/// `m` new ids of `measurements` and `s` of `series`, reserved in one statement that takes
/// the recording lock first and lets it go when it ends (outside any transaction): every
/// writer of those ids takes it, so the ids a batch gets are consecutive. The next id of
/// each to give.
fn reserve(c: &mut dyn Conn, m: usize, s: usize) -> Result<(i64, i64), StoreError> {
    if m == 0 && s == 0 {
        return Ok((0, 0));
    }
    let take = |t: &str, p: &str| {
        let seq = format!("pg_get_serial_sequence('{t}', 'id')");
        format!("CASE WHEN {p} > 0 THEN setval({seq}, nextval({seq}) + {p} - 1) ELSE 0 END")
    };
    // The lock is taken in FROM, before the target list is computed.
    let sql = format!(
        "SELECT {}, {} FROM (SELECT pg_advisory_xact_lock(?3)) AS turn",
        take("measurements", "CAST(?1 AS BIGINT)"),
        take("series", "CAST(?2 AS BIGINT)")
    );
    let (m_last, s_last): (i64, i64) = c
        .query_opt(&sql, &vals![m as i64, s as i64, RECORD_LOCK])?
        .ok_or_else(|| StoreError::Internal("no ids reserved for measurements and series".into()))?
        .read()?;
    Ok((m_last - m as i64 + 1, s_last - s as i64 + 1))
}

/// The next `n` ids from `next` as (first, last); `None` for none.
fn span(next: &mut i64, n: usize) -> Option<(i64, i64)> {
    (n > 0).then(|| {
        let from = *next;
        *next += n as i64;
        (from, *next - 1)
    })
}

/// `INSERT INTO {head} VALUES (…), (…) {tail}` for `rows` rows of `width` parameters.
fn multi_row(head: &str, rows: usize, width: usize, tail: &str) -> String {
    let values: Vec<String> = (0..rows)
        .map(|r| {
            let cells: Vec<String> = (1..=width).map(|k| format!("?{}", r * width + k)).collect();
            format!("({})", cells.join(", "))
        })
        .collect();
    format!("{head} VALUES {}{tail}", values.join(", "))
}

/// `rows` into `table (columns)`, as many a statement as the parameter limit lets.
fn insert_all(c: &mut dyn Conn, table: &str, rows: Vec<Vec<Value>>) -> Result<(), StoreError> {
    let Some(width) = rows.first().map(Vec::len) else {
        return Ok(());
    };
    for chunk in rows.chunks((CHUNK * 8 / width).max(1)) {
        let sql = multi_row(&format!("INSERT INTO {table}"), chunk.len(), width, "");
        c.execute(&sql, &chunk.concat())?;
    }
    Ok(())
}

/// Records `jobs` in one transaction, each in a savepoint, and hands each ticket its
/// result; the number of commits.
fn record_one_by_one(c: &mut dyn Conn, jobs: Vec<(EncodedAttempt, Ticket)>) -> u64 {
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
    let inserted = c.execute(
        "INSERT INTO attempts (campaign, trial_idx, attempt, status, reasons, phases, started_at, ended_at,
            soak_start_s, artifact_dir, state_before, state_after, device, untether, labels, state_soak)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) ON CONFLICT DO NOTHING",
        &attempt_row(a),
    )?;
    if inserted == 0 {
        return Err(StoreError::Duplicate { campaign: a.campaign.clone(), trial: a.trial_idx, attempt: a.attempt });
    }
    c.execute("DELETE FROM attempts_in_flight WHERE campaign = ?1 AND trial_idx = ?2 AND attempt = ?3", &key(a))?;
    let measurements = insert_rows(
        c,
        "measurements (campaign, trial_idx, attempt, seq, metric, value, unit, source)",
        measurement_rows(a),
    )?;
    let series =
        insert_rows(c, "series (campaign, trial_idx, attempt, seq, name, unit, source, points)", series_rows(a))?;
    insert_all(c, REPORT_COLUMNS, vec![report_row(a, measurements, series)])?;
    insert_all(c, ATTESTATION_COLUMNS, attestation_rows(a)?)?;
    Ok(())
}

const REPORT_COLUMNS: &str = "attempt_report (campaign, trial_idx, attempt, status, device, untether, soak_start_s,
    phases, reasons, labels, state_digest, battery, measurements_from, measurements_to, series_from, series_to)";

const ATTESTATION_COLUMNS: &str =
    "attestations (campaign, trial_idx, attempt, seq, step, step_when, text, answered_by, answered_at, answer)";

/// The `attempts` row of `a` (16 columns).
fn attempt_row(a: &EncodedAttempt) -> Vec<Value> {
    vals![
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
        a.untether.map(UntetherMode::as_str),
        &a.labels,
        a.state_soak.clone()
    ]
    .to_vec()
}

fn key(a: &EncodedAttempt) -> [Value; 3] {
    vals![&a.campaign, a.trial_idx, a.attempt]
}

/// The `measurements` rows of `a`, without their ids.
fn measurement_rows(a: &EncodedAttempt) -> impl Iterator<Item = Vec<Value>> + '_ {
    a.measurements
        .iter()
        .enumerate()
        .map(|(seq, m)| [key(a).to_vec(), vals![seq as u32, &m.metric, m.value, &m.unit, &m.source].to_vec()].concat())
}

/// The `series` rows of `a`, without their ids.
fn series_rows(a: &EncodedAttempt) -> impl Iterator<Item = Vec<Value>> + '_ {
    a.series.iter().enumerate().map(|(seq, x)| {
        [key(a).to_vec(), vals![seq as u32, &x.name, &x.unit, &x.source, x.points.clone()].to_vec()].concat()
    })
}

/// The `attempt_report` row of `a`, with its measurements' and series' id ranges.
fn report_row(a: &EncodedAttempt, measurements: Option<(i64, i64)>, series: Option<(i64, i64)>) -> Vec<Value> {
    vals![
        &a.campaign,
        a.trial_idx,
        a.attempt,
        a.status.as_str(),
        &a.device,
        a.untether.map(UntetherMode::as_str),
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
    ]
    .to_vec()
}

/// The `attestations` rows of `a`.
fn attestation_rows(a: &EncodedAttempt) -> Result<Vec<Vec<Value>>, StoreError> {
    a.attestations
        .iter()
        .enumerate()
        .map(|(seq, x)| {
            let answer = serde_json::to_string(&x.values)?;
            Ok([key(a).to_vec(), vals![seq as u32, &x.step, &x.when, &x.text, &x.by, &x.at, answer].to_vec()].concat())
        })
        .collect()
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
        let sql = multi_row(&format!("INSERT INTO {table}"), chunk.len(), chunk[0].len(), " RETURNING id");
        let params: Vec<Value> = chunk.iter().flatten().cloned().collect();
        for r in c.query(&sql, &params)? {
            let id: i64 = r.read()?;
            range = Some(range.map_or((id, id), |(from, to)| (from.min(id), to.max(id))));
        }
    }
    Ok(range)
}

#[cfg(test)]
mod tests {
    use super::super::encoded_attempt::EncodedAttempt;
    use super::super::store::tests::{attempt, campaign};
    use super::*;
    use crate::store::Store;

    fn jobs(from: u32, to: u32) -> Vec<(EncodedAttempt, Ticket)> {
        (from..to).map(|i| (EncodedAttempt::encode(attempt("c-1", i, 0, true)), Ticket::default())).collect()
    }

    /// A batch goes in as one statement, with its rows; one whose attempt is there already
    /// fails whole and changes nothing (the slower path then sorts it out); one too big
    /// for a statement's parameters is left to that path.
    #[test_needs::needs(postgres)]
    #[test]
    fn a_batch_is_one_statement_unless_it_holds_a_duplicate_or_is_too_big() {
        let url = crate::store::PgUrl::parse(&crate::testing::postgres::fresh_database()).unwrap();
        let s = Store::open_postgres(&url).unwrap();
        s.create_campaign(&campaign("c-1", 2000), 2, 1).unwrap();
        let count = |table: &'static str| {
            s.db.call(move |c| c.query(&format!("SELECT COUNT(*) FROM {table}"), &[])).unwrap()[0]
                .read::<i64>()
                .unwrap()
        };
        let recorded = s.db.call(|c| record_in_one(c, &jobs(0, 3)).map_err(|e| DbError::Closed(e.to_string())));
        assert!(recorded.unwrap(), "three attempts were not recorded in one statement");
        let rows = [count("attempts"), count("attempt_report"), count("measurements"), count("series")];
        assert_eq!(rows, [3, 3, 6, 6], "attempts, reports, measurements, series");
        let again = s.db.call(|c| Ok(record_in_one(c, &jobs(2, 4)).is_err())).unwrap();
        assert!(again, "a batch holding a recorded attempt went in");
        assert_eq!(
            [count("attempts"), count("attempt_report"), count("measurements")],
            [3, 3, 6],
            "it changed something"
        );
        let too_big = s.db.call(|c| Ok(record_in_one(c, &jobs(3, 2000)).ok())).unwrap();
        assert_eq!(too_big, Some(false), "{} attempts in one statement", 2000 - 3);
        assert_eq!(count("attempts"), 3);
    }
}
