//! Campaign summaries: one row per campaign × model × variant × metric (a report's
//! `MetricRow`), written when a report is built, so that history and reviews read no
//! measurements. The values are kept too (`vals`), so that a later comparison can still
//! run Welch and Mann–Whitney on them.

use serde::Serialize;

use super::backend::{Columns, DbError, Dialect, FromRow, read_all, vals};
use super::error::StoreError;
use super::records::{CampaignId, CampaignStatus};
use super::store::Store;
use crate::stats::Summary;

/// One campaign × model × variant × metric, as its report computed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    pub campaign: CampaignId,
    pub model: String,
    pub variant: String,
    pub metric: String,
    pub build: String,
    pub config: String,
    /// The build's artifact hash for this model's platform (`content_hashes.builds`);
    /// `None` when the campaign stored none.
    pub build_sha256: Option<String>,
    /// The devices of this model in the campaign.
    pub devices: Vec<String>,
    pub unit: String,
    pub sources: Vec<String>,
    pub gating: bool,
    pub n: usize,
    pub non_finite: usize,
    pub mean: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// The level of the confidence interval (0.95).
    pub confidence: f64,
    /// `None` when n = 0.
    pub summary: Option<Summary>,
    /// The values behind `summary`, in trial order.
    pub values: Vec<f64>,
    /// `stats::SUMMARY_VERSION` when written; a lower one is recomputed.
    pub summary_version: u32,
}

/// A summary row with its campaign and, for a scheduled campaign, its slot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryRow {
    pub row: SummaryRow,
    pub created_at: String,
    pub status: CampaignStatus,
    pub runbook_sha256: String,
    pub seed: u64,
    /// The schedule and due time of the slot that ran the campaign; `None` for one run by hand.
    pub schedule: Option<String>,
    pub due_utc: Option<String>,
}

/// From [`COLUMNS`], then the campaign's `created_at, status, runbook_sha256, seed` and the
/// slot's `schedule, due_utc`.
impl FromRow<'_> for HistoryRow {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(HistoryRow {
            row: c.read()?,
            created_at: c.get()?,
            status: CampaignStatus::parse(&c.get::<String>()?).unwrap_or(CampaignStatus::Interrupted),
            runbook_sha256: c.get()?,
            seed: c.get::<i64>()? as u64,
            schedule: c.get()?,
            due_utc: c.get()?,
        })
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{len} bytes is not a whole number of 8-byte values")]
struct ValuesDecodeError {
    len: usize,
}

/// Values as little-endian f64, 8 bytes each (as `Series::points_blob` stores points).
fn values_blob(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn values_from_blob(blob: &[u8]) -> Result<Vec<f64>, ValuesDecodeError> {
    if !blob.len().is_multiple_of(8) {
        return Err(ValuesDecodeError { len: blob.len() });
    }
    Ok(blob.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8-byte chunk"))).collect())
}

const COLUMNS: &str = "s.campaign, s.model, s.variant, s.metric, s.build, s.config, s.build_sha256, s.devices, \
s.unit, s.sources, s.gating, s.n, s.non_finite, s.mean, s.ci_low, s.ci_high, s.confidence, s.summary, s.vals, \
s.summary_version";

/// From [`COLUMNS`].
impl FromRow<'_> for SummaryRow {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(SummaryRow {
            campaign: c.get()?,
            model: c.get()?,
            variant: c.get()?,
            metric: c.get()?,
            build: c.get()?,
            config: c.get()?,
            build_sha256: c.get()?,
            devices: c.json()?,
            unit: c.get()?,
            sources: c.json()?,
            gating: c.get()?,
            n: c.get::<i64>()? as usize,
            non_finite: c.get::<i64>()? as usize,
            mean: c.get()?,
            ci_low: c.get()?,
            ci_high: c.get()?,
            confidence: c.get()?,
            summary: c.json_opt()?,
            values: {
                let blob: Vec<u8> = c.get()?;
                values_from_blob(&blob).map_err(|e| DbError::Type(format!("column 18: {e}")))?
            },
            summary_version: c.get()?,
        })
    }
}

impl Store {
    /// Replaces the summaries of `campaign` with `rows`, in one transaction. Rows come
    /// back in the order given (the report's: `seq`).
    pub fn put_summaries(&self, campaign: &str, rows: &[SummaryRow]) -> Result<(), StoreError> {
        let mut values = Vec::with_capacity(rows.len());
        for (seq, r) in rows.iter().enumerate() {
            values.push(vals![
                campaign,
                &r.model,
                &r.variant,
                &r.metric,
                &r.build,
                &r.config,
                r.build_sha256.clone(),
                serde_json::to_string(&r.devices)?,
                &r.unit,
                serde_json::to_string(&r.sources)?,
                r.gating,
                r.n as i64,
                r.non_finite as i64,
                r.mean,
                r.ci_low,
                r.ci_high,
                r.confidence,
                r.summary.as_ref().map(serde_json::to_string).transpose()?,
                values_blob(&r.values),
                r.summary_version,
                seq as i64
            ]);
        }
        let campaign = vals![campaign];
        self.db.call(move |c| {
            c.transaction(|c| {
                // Writers of one campaign's summaries take turns (an agent that recorded the
                // last trial and a `lab wait` both write the report files): on PostgreSQL the
                // second's DELETE would not see the first's rows, and its INSERT would
                // collide with them. SQLite's writes take turns already.
                if c.dialect() == super::Dialect::Postgres {
                    c.execute("SELECT pg_advisory_xact_lock(hashtext('lab summaries ' || ?1))", &campaign)?;
                }
                c.execute("DELETE FROM campaign_summaries WHERE campaign = ?1", &campaign)?;
                for row in &values {
                    c.execute(
                        "INSERT INTO campaign_summaries (campaign, model, variant, metric, build, config, build_sha256,
                            devices, unit, sources, gating, n, non_finite, mean, ci_low, ci_high, confidence, summary,
                            vals, summary_version, seq)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
                            ?20, ?21)",
                        row,
                    )?;
                }
                Ok(())
            })
        })?;
        Ok(())
    }

    /// The summaries of `campaign`, in the order they were put.
    pub fn summaries(&self, campaign: &str) -> Result<Vec<SummaryRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM campaign_summaries s WHERE s.campaign = ?1 ORDER BY s.seq");
        let campaign = vals![campaign];
        let rows = self.db.call(move |c| c.query(&sql, &campaign))?;
        Ok(read_all(&rows)?)
    }

    /// Every summary of the campaigns of runbook `runbook_name`, campaign by campaign in
    /// time order: a slot's due time for a scheduled campaign (the wall clock may be
    /// `LAB_NOW`'s), else when it was created. Within a campaign, in report order. The
    /// rows' `values` are left empty.
    pub fn history_rows(&self, runbook_name: &str) -> Result<Vec<HistoryRow>, StoreError> {
        let name = vals![runbook_name];
        let rows = self.db.call(move |c| {
            // A history point is a mean with its interval: the values stay in the store.
            let empty = match c.dialect() {
                Dialect::Sqlite => "x''",
                Dialect::Postgres => "'\\x'::bytea",
            };
            let sql = format!(
                "SELECT {}, c.created_at, c.status, c.runbook_sha256, c.seed, sl.schedule, sl.due_utc
                 FROM campaign_summaries s JOIN campaigns c ON c.id = s.campaign
                 LEFT JOIN schedule_slots sl ON sl.campaign = c.id
                 WHERE c.runbook_name = ?1
                 ORDER BY COALESCE(sl.due_utc, c.created_at), c.id, s.seq",
                COLUMNS.replace("s.vals", &format!("{empty} AS vals"))
            );
            c.query(&sql, &name)
        })?;
        Ok(read_all(&rows)?)
    }

    /// The runbook names of the stored campaigns, sorted, without reading any plan.
    pub fn runbook_names(&self) -> Result<Vec<String>, StoreError> {
        let rows =
            self.db.call(|c| c.query("SELECT DISTINCT runbook_name FROM campaigns ORDER BY runbook_name", &[]))?;
        Ok(read_all(&rows)?)
    }

    /// Whether `campaign`'s stored summaries can stand for its measurements: there are
    /// some, none older than `stats::SUMMARY_VERSION`, and the campaign is not running
    /// (attempts recorded after a `lab report` during the run are not in them; the run's
    /// end rewrites them).
    pub fn summaries_current(&self, campaign: &str) -> Result<bool, StoreError> {
        let params = vals![campaign, crate::stats::SUMMARY_VERSION];
        let row = self.db.call(move |c| {
            c.query_opt(
                "SELECT COUNT(s.campaign) > 0 AND MIN(s.summary_version) >= ?2 AND c.status <> 'running'
                 FROM campaigns c LEFT JOIN campaign_summaries s ON s.campaign = c.id WHERE c.id = ?1
                 GROUP BY c.id, c.status",
                &params,
            )
        })?;
        Ok(row.map(|r| r.read::<Option<bool>>()).transpose()?.flatten().unwrap_or(false))
    }

    /// Campaigns of runbook `runbook_name` whose summaries are missing or older than
    /// `stats::SUMMARY_VERSION`, oldest first: what `lab history` recomputes.
    pub fn stale_summaries(&self, runbook_name: &str) -> Result<Vec<CampaignId>, StoreError> {
        let params = vals![runbook_name, crate::stats::SUMMARY_VERSION];
        let rows = self.db.call(move |c| {
            c.query(
                "SELECT c.id FROM campaigns c LEFT JOIN campaign_summaries s ON s.campaign = c.id
                 WHERE c.runbook_name = ?1
                 GROUP BY c.id HAVING COUNT(s.campaign) = 0 OR MIN(s.summary_version) < ?2
                 ORDER BY c.created_at, c.id",
                &params,
            )
        })?;
        Ok(read_all(&rows)?)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stats::summarize;
    use crate::store::{Claimant, NewCampaign};

    pub(crate) use crate::testing::postgres::sqlite_store as store;

    pub(crate) fn new_campaign(id: &str, runbook: &str, created_at: &str) -> NewCampaign {
        NewCampaign {
            id: id.into(),
            runbook_name: runbook.into(),
            runbook_path: format!("{runbook}.toml"),
            runbook_text: String::new(),
            runbook_sha256: "ab".into(),
            lab_text: String::new(),
            lab_sha256: "cd".into(),
            content_hashes: serde_json::json!({}),
            tool_version: "0".into(),
            seed: u64::MAX - 1,
            created_at: created_at.into(),
            planned_trials: Vec::new(),
            plan_json: "{}".into(),
        }
    }

    pub(crate) fn row(campaign: &str, variant: &str, metric: &str, values: &[f64]) -> SummaryRow {
        let summary = summarize(values, 0.95);
        SummaryRow {
            campaign: campaign.into(),
            model: "iPhone 6s".into(),
            variant: variant.into(),
            metric: metric.into(),
            build: variant.into(),
            config: "default".into(),
            build_sha256: (variant != "control").then(|| "bb02".to_string()),
            devices: vec!["sim-iphone-1".into(), "sim-iphone-2".into()],
            unit: "%".into(),
            sources: vec!["sim".into()],
            gating: metric == "cpu_pct",
            n: values.len(),
            non_finite: 0,
            mean: summary.as_ref().map(|s| s.mean),
            ci_low: summary.as_ref().and_then(|s| s.ci_low),
            ci_high: summary.as_ref().and_then(|s| s.ci_high),
            confidence: 0.95,
            summary,
            values: values.to_vec(),
            summary_version: crate::stats::SUMMARY_VERSION,
        }
    }

    fn summaries_come_back_bit_for_bit_and_are_replaced_whole(s: &Store) {
        s.create_campaign(&new_campaign("c1", "rb", "2026-01-01T00:00:00Z"), 3, 1).unwrap();
        let rows = vec![
            row("c1", "envoy-poll", "cpu_pct", &[185.0, 1.0 / 3.0, -0.0]),
            row("c1", "control", "cpu_pct", &[12.0]),
            row("c1", "control", "memory_mb", &[]),
        ];
        s.put_summaries("c1", &rows).unwrap();
        let back = s.summaries("c1").unwrap();
        assert_eq!(back, rows, "in the order put");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back[0].values), bits(&rows[0].values));
        assert_eq!((back[2].summary.as_ref(), back[2].mean), (None, None), "n = 0 has no summary");

        s.put_summaries("c1", &rows[1..2]).unwrap();
        assert_eq!(s.summaries("c1").unwrap(), rows[1..2], "a second put replaces the first");
        assert!(s.summaries("other").unwrap().is_empty());
    }

    /// Two writers (an agent and a `lab wait`) put one campaign's summaries at once, again
    /// and again: none fails, and the rows are one writer's whole.
    fn summaries_put_at_once_by_two_writers_neither_fails(s: &Store) {
        s.create_campaign(&new_campaign("c1", "rb", "2026-01-01T00:00:00Z"), 3, 1).unwrap();
        let rows = vec![row("c1", "control", "cpu_pct", &[12.0, 13.0]), row("c1", "control", "memory_mb", &[1.0])];
        let other = crate::store::store::tests::other_handle(s);
        let writers: Vec<_> = [s.clone(), other]
            .into_iter()
            .map(|st| {
                let rows = rows.clone();
                std::thread::spawn(move || {
                    for _ in 0..30 {
                        st.put_summaries("c1", &rows).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(s.summaries("c1").unwrap(), rows);
    }

    crate::testing::postgres::on_both!(
        summaries_put_at_once_by_two_writers_neither_fails,
        summaries_come_back_bit_for_bit_and_are_replaced_whole,
        history_is_in_slot_time_order_with_hand_runs_by_creation,
        summaries_are_current_when_present_up_to_date_and_not_taken_during_the_run,
        stale_summaries_are_the_missing_and_the_old,
    );

    #[test]
    fn a_damaged_values_blob_is_an_error() {
        let (_d, s) = store();
        s.create_campaign(&new_campaign("c1", "rb", "t"), 3, 1).unwrap();
        s.put_summaries("c1", &[row("c1", "control", "cpu_pct", &[1.0, 2.0])]).unwrap();
        s.lock().unwrap().execute("UPDATE campaign_summaries SET vals = x'010203'", []).unwrap();
        let e = s.summaries("c1").unwrap_err();
        assert!(e.to_string().contains("3 bytes is not a whole number of 8-byte values"), "{e}");
    }

    fn history_is_in_slot_time_order_with_hand_runs_by_creation(s: &Store) {
        // Created in the wrong order on the wall clock: the slots (LAB_NOW) decide.
        s.create_campaign(&new_campaign("w2", "rb", "2026-01-01T10:00:00Z"), 3, 1).unwrap();
        s.create_campaign(&new_campaign("w1", "rb", "2026-01-01T10:05:00Z"), 3, 1).unwrap();
        s.create_campaign(&new_campaign("hand", "rb", "2026-01-08T12:00:00Z"), 3, 1).unwrap();
        s.create_campaign(&new_campaign("x", "other", "2026-01-01T00:00:00Z"), 3, 1).unwrap();
        let by = Claimant { pid: 1, host: "h", at: "t" };
        s.claim_slot("weekly", "2026-01-05T03:00:00Z", Some("w1"), &by, &[]).unwrap();
        s.claim_slot("weekly", "2026-01-12T03:00:00Z", Some("w2"), &by, &[]).unwrap();
        for id in ["w2", "w1", "hand", "x"] {
            s.put_summaries(
                id,
                &[row(id, "control", "cpu_pct", &[12.0, 12.5]), row(id, "envoy-poll", "cpu_pct", &[185.0, 186.0])],
            )
            .unwrap();
        }
        let h = s.history_rows("rb").unwrap();
        let order: Vec<(&str, &str, Option<&str>)> =
            h.iter().map(|r| (r.row.campaign.as_str(), r.row.variant.as_str(), r.due_utc.as_deref())).collect();
        assert_eq!(
            order,
            [
                ("w1", "control", Some("2026-01-05T03:00:00Z")),
                ("w1", "envoy-poll", Some("2026-01-05T03:00:00Z")),
                ("hand", "control", None),
                ("hand", "envoy-poll", None),
                ("w2", "control", Some("2026-01-12T03:00:00Z")),
                ("w2", "envoy-poll", Some("2026-01-12T03:00:00Z")),
            ]
        );
        let first = &h[0];
        assert_eq!(
            (first.schedule.as_deref(), first.status, first.seed, first.created_at.as_str()),
            (Some("weekly"), CampaignStatus::Running, u64::MAX - 1, "2026-01-01T10:05:00Z")
        );
        // The values stay in the store; the mean and n come along.
        assert!(h.iter().all(|r| r.row.values.is_empty() && r.row.n == 2), "{h:?}");
        assert_eq!(s.summaries("w1").unwrap()[0].values, [12.0, 12.5]);
        assert_eq!(s.runbook_names().unwrap(), ["other", "rb"]);
    }

    fn summaries_are_current_when_present_up_to_date_and_not_taken_during_the_run(s: &Store) {
        s.create_campaign(&new_campaign("a", "rb", "t1"), 3, 1).unwrap();
        assert!(!s.summaries_current("a").unwrap(), "none yet");
        assert!(!s.summaries_current("nope").unwrap(), "no such campaign");
        s.put_summaries("a", &[row("a", "control", "cpu_pct", &[1.0])]).unwrap();
        assert!(!s.summaries_current("a").unwrap(), "the campaign is still running");
        s.finish_campaign("a", CampaignStatus::Done, "t2", None, None).unwrap();
        assert!(s.summaries_current("a").unwrap());
        let old =
            SummaryRow { summary_version: crate::stats::SUMMARY_VERSION - 1, ..row("a", "busy", "cpu_pct", &[1.0]) };
        s.put_summaries("a", &[row("a", "control", "cpu_pct", &[1.0]), old]).unwrap();
        assert!(!s.summaries_current("a").unwrap(), "one row is outdated");
    }

    fn stale_summaries_are_the_missing_and_the_old(s: &Store) {
        for (id, at) in [("a", "t1"), ("b", "t2"), ("c", "t3")] {
            s.create_campaign(&new_campaign(id, "rb", at), 3, 1).unwrap();
        }
        s.create_campaign(&new_campaign("x", "other", "t0"), 3, 1).unwrap();
        assert_eq!(s.stale_summaries("rb").unwrap(), ["a", "b", "c"]);
        s.put_summaries("a", &[row("a", "control", "cpu_pct", &[1.0])]).unwrap();
        let old =
            SummaryRow { summary_version: crate::stats::SUMMARY_VERSION - 1, ..row("b", "control", "cpu_pct", &[1.0]) };
        s.put_summaries("b", &[row("b", "envoy-poll", "cpu_pct", &[1.0]), old]).unwrap();
        assert_eq!(s.stale_summaries("rb").unwrap(), ["b", "c"], "one old row makes the campaign stale");
        assert_eq!(s.stale_summaries("other").unwrap(), ["x"]);
        assert!(s.stale_summaries("none").unwrap().is_empty());
    }
}
