//! Reading a campaign's attempts back with their measurements, series and attestations.

use super::backend::{Columns, Conn, DbError, Dialect, FromRow, vals};
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
    c.query_each(readers(c.dialect()).0, &vals![id], &mut |r| {
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

/// [`MEASUREMENTS_OF_CAMPAIGN`] and [`SERIES_OF_CAMPAIGN`] as PostgreSQL must be asked
/// them: each attempt's range in a `LATERAL` subquery that `OFFSET 0` keeps from being
/// flattened into a join. As a join, on a database whose statistics are missing or were
/// gathered while it was small (a new one, early on), PostgreSQL compared every attempt
/// with a materialized scan of the whole table: 1.37 s for a campaign of 1 250 attempts
/// in the agents bench, 7 ms once analyzed, and growing with the product of the two.
macro_rules! each_range_pg {
    ($columns:literal, $table:literal, $alias:literal) => {
        $crate::store::attempts::each_range_pg!($columns, $table, $alias, "")
    };
    // `$and`: more conditions on the table's row `x`, each after an `AND`.
    ($columns:literal, $table:literal, $alias:literal, $and:literal) => {
        concat!(
            "SELECT ",
            $columns,
            " FROM attempt_report r, LATERAL (SELECT x.* FROM ",
            $table,
            " x
                WHERE x.id BETWEEN r.",
            $table,
            "_from AND r.",
            $table,
            "_to AND x.campaign = r.campaign
                  AND x.trial_idx = r.trial_idx AND x.attempt = r.attempt",
            $and,
            " OFFSET 0) ",
            $alias,
            "
             WHERE r.campaign = ?1 ORDER BY r.trial_idx, r.attempt, ",
            $alias,
            ".seq"
        )
    };
}
pub(super) use each_range_pg;

const MEASUREMENTS_OF_CAMPAIGN_PG: &str =
    each_range_pg!("m.trial_idx, m.attempt, m.metric, m.value, m.unit, m.source", "measurements", "m");
const SERIES_OF_CAMPAIGN_PG: &str =
    each_range_pg!("s.trial_idx, s.attempt, s.name, s.unit, s.source, s.points", "series", "s");

/// A campaign's (measurements, series) readers, as `dialect` is asked for them.
fn readers(dialect: Dialect) -> (&'static str, &'static str) {
    match dialect {
        Dialect::Sqlite => (MEASUREMENTS_OF_CAMPAIGN, SERIES_OF_CAMPAIGN),
        Dialect::Postgres => (MEASUREMENTS_OF_CAMPAIGN_PG, SERIES_OF_CAMPAIGN_PG),
    }
}

/// A measurement from `metric, value, unit, source` (the type is the measuring layer's;
/// its row is the store's).
impl FromRow<'_> for Measurement {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(Measurement { metric: c.get()?, value: c.get()?, unit: c.get()?, source: c.get()? })
    }
}

fn series_rows(c: &mut dyn Conn, id: &str) -> Result<Vec<AttemptSeries>, StoreError> {
    let mut out = Vec::new();
    c.query_each(readers(c.dialect()).1, &vals![id], &mut |r| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::store::tests::{grown_postgres_store, plan_of};

    /// On a new PostgreSQL database (statistics gathered while it was small) the readers walk
    /// each attempt's range of ids by the primary key, never a scan of the whole table,
    /// and read what was recorded.
    #[test_needs::needs(postgres)]
    #[test]
    fn a_new_postgres_store_reads_each_attempts_range_by_its_ids() {
        let s = grown_postgres_store();
        for (sql, table) in [(MEASUREMENTS_OF_CAMPAIGN_PG, "measurements"), (SERIES_OF_CAMPAIGN_PG, "series")] {
            let plan = plan_of(&s, &sql.replace("?1", "'a'"));
            assert!(plan.contains(&format!("Index Scan on {table}_pkey")), "{table}: {plan}");
            assert!(!plan.contains(&format!("Seq Scan on {table}")), "{table}: {plan}");
        }
        let got = s.attempts("b").unwrap();
        assert_eq!(got.len(), 150);
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, a)| a.trial_idx == i as u32 && a.measurements.len() == 2 && a.series.len() == 2)
        );
        assert_eq!(got[3].measurements[0].metric, "cpu_pct");
        assert_eq!(got[3].series[1].name, "temp_c");
    }
}
