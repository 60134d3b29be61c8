//! A campaign's series of one name handed over one at a time, for a reader that reduces
//! each as it is read (the report's power bands): at 144 000 trials the power traces are
//! hundreds of MB, and no step needs them all at once.

use super::backend::{Columns, DbError, Dialect, vals};
use super::error::StoreError;
use super::store::Store;
use crate::measure::Series;

/// What [`Store::fold_series_named`] hands each series to.
pub trait SeriesFold: Clone + Send + 'static {
    /// One series' points, every series in trial, attempt then `seq` order.
    fn points(&mut self, trial_idx: u32, attempt: u32, points: &[(f64, f64)]);
    /// After each pass: whether to be handed every series once more, from the same snapshot
    /// (a fold that learnt in the first pass what it needed before it).
    fn again(&mut self) -> bool;
}

/// Each attempt's series through its `attempt_report` id range (the series table has no
/// index by campaign), so the rows come in key order without sorting their blobs.
const SERIES_NAMED: &str = "
    SELECT r.trial_idx, r.attempt, s.points
    FROM attempt_report r JOIN series s ON s.id BETWEEN r.series_from AND r.series_to
    WHERE r.campaign = ?1 AND s.campaign = r.campaign AND s.trial_idx = r.trial_idx AND s.attempt = r.attempt
        AND s.name = ?2 AND length(s.points) > 0
    ORDER BY r.trial_idx, r.attempt, s.seq";

/// [`SERIES_NAMED`] as PostgreSQL must be asked it, each attempt's range in a `LATERAL`
/// subquery kept apart by `OFFSET 0` (the reason is `attempts.rs`' readers').
const SERIES_NAMED_PG: &str = super::attempts::each_range_pg!(
    "r.trial_idx, r.attempt, s.points",
    "series",
    "s",
    " AND x.name = ?2 AND length(x.points) > 0"
);

impl Store {
    /// Hands every non-empty series called `name` of campaign `id` to a copy of `fold`,
    /// in passes over one snapshot while it asks for another, and returns it. Only one
    /// series' points are held at a time. On PostgreSQL a lost session reads again from a
    /// fresh copy.
    pub fn fold_series_named<F: SeriesFold>(&self, id: &str, name: &str, fold: F) -> Result<F, StoreError> {
        let (id, name) = (id.to_string(), name.to_string());
        Ok(self.db.call(move |c| {
            let mut f = fold.clone();
            let params = vals![id.as_str(), name.as_str()];
            let mut points = Vec::new();
            c.read_transaction(|c| {
                let sql = match c.dialect() {
                    Dialect::Sqlite => SERIES_NAMED,
                    Dialect::Postgres => SERIES_NAMED_PG,
                };
                loop {
                    c.query_each(sql, &params, &mut |r| {
                        let mut c = Columns::new(&r);
                        let (t, a) = (c.get::<i64>()? as u32, c.get::<i64>()? as u32);
                        let decoded = Series::points_in_blob(c.blob().unwrap_or(&[]))
                            .map_err(|e| DbError::Type(format!("a `{name}` series of campaign {id}: {e}")))?;
                        points.clear();
                        points.extend(decoded);
                        f.points(t, a, &points);
                        Ok(())
                    })?;
                    if !f.again() {
                        return Ok(());
                    }
                }
            })?;
            Ok(f)
        })?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::store::tests::{grown_postgres_store, plan_of};

    #[derive(Clone, Default)]
    struct Seen(Vec<(u32, u32, usize)>);

    impl SeriesFold for Seen {
        fn points(&mut self, trial_idx: u32, attempt: u32, points: &[(f64, f64)]) {
            self.0.push((trial_idx, attempt, points.len()));
        }
        fn again(&mut self) -> bool {
            false
        }
    }

    /// On a new PostgreSQL database (statistics gathered while it was small) the series of one
    /// name are read through each attempt's id range by the primary key, not a scan of the
    /// table, and come in key order.
    #[test_needs::needs(postgres)]
    #[test]
    fn a_new_postgres_store_folds_a_series_by_each_attempts_range() {
        let s = grown_postgres_store();
        let plan = plan_of(&s, &SERIES_NAMED_PG.replace("?1", "'a'").replace("?2", "'battery_pct'"));
        assert!(plan.contains("Index Scan on series_pkey"), "{plan}");
        assert!(!plan.contains("Seq Scan on series"), "{plan}");
        let seen = s.fold_series_named("a", "battery_pct", Seen::default()).unwrap();
        assert_eq!(seen.0, (0..150).map(|i| (i, 1, 2)).collect::<Vec<_>>());
    }
}
