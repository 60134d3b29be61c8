//! A campaign's series of one name handed over one at a time, for a reader that reduces
//! each as it is read (the report's power bands): at 144 000 trials the power traces are
//! hundreds of MB, and no step needs them all at once.

use super::backend::{Columns, DbError, vals};
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
                loop {
                    c.query_each(SERIES_NAMED, &params, &mut |r| {
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
