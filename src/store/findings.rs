//! Schedule findings: what a slot's review found, one row per model × variant × gating
//! metric, and how its confirmation came out.
//!
//! A slot's findings are inserted once (`ON CONFLICT DO NOTHING`): a review resumed
//! after a crash keeps the first screening, and only the decision columns change later.

use serde::{Deserialize, Serialize};

use super::backend::{Columns, DbError, FromRow, Value, read_all, vals};
use super::error::StoreError;
use super::records::CampaignId;
use super::store::Store;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingState {
    /// A confirmation campaign is planned or running.
    Confirming,
    /// The confirmation found the same change: alerted (a regression) or recorded (an improvement).
    Confirmed,
    /// The confirmation found no change: a false alarm of the screening.
    NotConfirmed,
    /// The confirmation could not decide (too few valid trials, or a change in the other direction).
    Inconclusive,
    /// The build did not change: the lab, the devices or the workload moved. Not confirmed.
    SameBuild,
    /// The reference build is gone (an uncached ios/android artifact): cannot be confirmed.
    Unconfirmable,
    /// Confirmation is off: taken as found.
    Unconfirmed,
}

impl FindingState {
    pub fn as_str(self) -> &'static str {
        match self {
            FindingState::Confirming => "confirming",
            FindingState::Confirmed => "confirmed",
            FindingState::NotConfirmed => "not-confirmed",
            FindingState::Inconclusive => "inconclusive",
            FindingState::SameBuild => "same-build",
            FindingState::Unconfirmable => "unconfirmable",
            FindingState::Unconfirmed => "unconfirmed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "confirming" => FindingState::Confirming,
            "confirmed" => FindingState::Confirmed,
            "not-confirmed" => FindingState::NotConfirmed,
            "inconclusive" => FindingState::Inconclusive,
            "same-build" => FindingState::SameBuild,
            "unconfirmable" => FindingState::Unconfirmable,
            "unconfirmed" => FindingState::Unconfirmed,
            _ => return None,
        })
    }
}

/// One finding of a slot's review.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingRow {
    /// Given by the store; ignored by `insert_findings`.
    pub id: i64,
    pub schedule: String,
    pub due_utc: String,
    /// The slot's campaign.
    pub campaign: CampaignId,
    pub model: String,
    pub variant: String,
    pub metric: String,
    /// `worse` or `better`.
    pub direction: String,
    /// The comparison with the baseline said so (not only a change point).
    pub by_verdict: bool,
    /// The campaign at the first point of the new level (the slot's campaign for a verdict alone).
    pub change_point: Option<CampaignId>,
    /// `{policy, campaigns: [...], reference}`.
    pub baseline: serde_json::Value,
    /// `{comparison: MetricComparison | null, change_point: ChangePoint | null}`.
    pub screen: serde_json::Value,
    pub state: FindingState,
    pub confirm_campaign: Option<CampaignId>,
    /// The confirmation's `MetricComparison`.
    pub confirm: Option<serde_json::Value>,
    pub decided_at: Option<String>,
    pub note: Option<String>,
}

const COLUMNS: &str = "id, schedule, due_utc, campaign, model, variant, metric, direction, by_verdict, change_point, \
baseline, screen, state, confirm_campaign, confirm, decided_at, note";

/// From [`COLUMNS`].
impl FromRow<'_> for FindingRow {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(FindingRow {
            id: c.get()?,
            schedule: c.get()?,
            due_utc: c.get()?,
            campaign: c.get()?,
            model: c.get()?,
            variant: c.get()?,
            metric: c.get()?,
            direction: c.get()?,
            by_verdict: c.get()?,
            change_point: c.get()?,
            baseline: c.json()?,
            screen: c.json()?,
            state: {
                let state: String = c.get()?;
                FindingState::parse(&state).ok_or_else(|| DbError::Type(format!("unknown finding state `{state}`")))?
            },
            confirm_campaign: c.get()?,
            confirm: c
                .get::<Option<String>>()?
                .map(|c| serde_json::from_str(&c))
                .transpose()
                .map_err(|e| DbError::Type(e.to_string()))?,
            decided_at: c.get()?,
            note: c.get()?,
        })
    }
}

impl Store {
    /// Inserts findings, each under its own slot (`schedule`, `due_utc`), in one
    /// transaction; a finding whose slot × model × variant × metric is already there is
    /// left as it was. Returns how many were new.
    pub fn insert_findings(&self, rows: &[FindingRow]) -> Result<usize, StoreError> {
        let rows: Vec<_> = rows
            .iter()
            .map(|f| {
                vals![
                    &f.schedule,
                    &f.due_utc,
                    &f.campaign,
                    &f.model,
                    &f.variant,
                    &f.metric,
                    &f.direction,
                    f.by_verdict,
                    f.change_point.clone(),
                    f.baseline.to_string(),
                    f.screen.to_string(),
                    f.state.as_str(),
                    f.confirm_campaign.clone(),
                    f.confirm.as_ref().map(|c| c.to_string()),
                    f.decided_at.clone(),
                    f.note.clone()
                ]
            })
            .collect();
        let inserted = self.db.call(move |c| {
            c.transaction(|c| {
                let mut inserted = 0;
                for row in &rows {
                    inserted += c.execute(
                        "INSERT INTO schedule_findings (schedule, due_utc, campaign, model, variant, metric, direction,
                            by_verdict, change_point, baseline, screen, state, confirm_campaign, confirm, decided_at, note)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
                         ON CONFLICT DO NOTHING",
                        row,
                    )?;
                }
                Ok(inserted)
            })
        })?;
        Ok(inserted as usize)
    }

    /// The findings of one slot, in the order they were inserted.
    pub fn findings_of_slot(&self, schedule: &str, due_utc: &str) -> Result<Vec<FindingRow>, StoreError> {
        self.findings(
            format!("SELECT {COLUMNS} FROM schedule_findings WHERE schedule = ?1 AND due_utc = ?2 ORDER BY id"),
            vals![schedule, due_utc].to_vec(),
        )
    }

    /// Every finding of a schedule, oldest slot first.
    pub fn findings_of_schedule(&self, schedule: &str) -> Result<Vec<FindingRow>, StoreError> {
        self.findings(
            format!("SELECT {COLUMNS} FROM schedule_findings WHERE schedule = ?1 ORDER BY due_utc, id"),
            vals![schedule].to_vec(),
        )
    }

    fn findings(&self, sql: String, params: Vec<Value>) -> Result<Vec<FindingRow>, StoreError> {
        let rows = self.db.call(move |c| c.query(&sql, &params))?;
        Ok(read_all(&rows)?)
    }

    /// Names the confirmation campaign of findings `ids` (one campaign confirms every
    /// finding of a variant), in one transaction.
    pub fn set_confirm_campaign(&self, ids: &[i64], campaign: &str) -> Result<(), StoreError> {
        let (ids, campaign) = (ids.to_vec(), campaign.to_string());
        self.db.call(move |c| {
            c.transaction(|c| {
                for id in &ids {
                    c.execute(
                        "UPDATE schedule_findings SET confirm_campaign = ?2 WHERE id = ?1",
                        &vals![*id, &campaign],
                    )?;
                }
                Ok(())
            })
        })?;
        Ok(())
    }

    /// Records how finding `id` was decided: its state, the confirmation's comparison (JSON),
    /// a note, and when.
    pub fn decide_finding(
        &self,
        id: i64,
        state: FindingState,
        confirm: Option<&serde_json::Value>,
        note: Option<&str>,
        at: &str,
    ) -> Result<(), StoreError> {
        let row = vals![id, state.as_str(), confirm.map(|c| c.to_string()), note, at];
        self.db.call(move |c| {
            c.execute(
                "UPDATE schedule_findings SET state = ?2, confirm = ?3, note = ?4, decided_at = ?5 WHERE id = ?1",
                &row,
            )
        })?;
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn finding(due: &str, variant: &str, metric: &str) -> FindingRow {
        FindingRow {
            id: 0,
            schedule: "weekly".into(),
            due_utc: due.into(),
            campaign: format!("c-{due}"),
            model: "iPhone 6s".into(),
            variant: variant.into(),
            metric: metric.into(),
            direction: "worse".into(),
            by_verdict: true,
            change_point: Some(format!("c-{due}")),
            baseline: json!({"policy": "last-change-point", "campaigns": ["c-0"], "reference": "c-0"}),
            screen: json!({"comparison": null, "change_point": null}),
            state: FindingState::Confirming,
            confirm_campaign: None,
            confirm: None,
            decided_at: None,
            note: None,
        }
    }

    #[test]
    fn every_state_round_trips_through_its_name() {
        let all = [
            FindingState::Confirming,
            FindingState::Confirmed,
            FindingState::NotConfirmed,
            FindingState::Inconclusive,
            FindingState::SameBuild,
            FindingState::Unconfirmable,
            FindingState::Unconfirmed,
        ];
        for s in all {
            assert_eq!(FindingState::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()), "serde says the same name");
        }
        assert_eq!(FindingState::parse("maybe"), None);
    }

    crate::testing::postgres::on_both!(a_slot_keeps_its_first_screening_and_its_decision_is_recorded);

    fn a_slot_keeps_its_first_screening_and_its_decision_is_recorded(s: &Store) {
        let first = vec![finding("d2", "envoy-poll", "cpu_pct"), finding("d2", "envoy-poll", "memory_mb")];
        assert_eq!(s.insert_findings(&first).unwrap(), 2);
        let again = FindingRow { direction: "better".into(), ..finding("d2", "envoy-poll", "cpu_pct") };
        assert_eq!(s.insert_findings(&[again, finding("d1", "envoy-poll", "cpu_pct")]).unwrap(), 1);
        let slot = s.findings_of_slot("weekly", "d2").unwrap();
        assert_eq!(slot.iter().map(|f| f.direction.as_str()).collect::<Vec<_>>(), ["worse", "worse"], "the first kept");
        assert_eq!(slot[0], FindingRow { id: slot[0].id, ..first[0].clone() }, "round trip");

        let ids: Vec<i64> = slot.iter().map(|f| f.id).collect();
        s.set_confirm_campaign(&ids, "confirm-1").unwrap();
        let cmp = json!({"verdict": "worse", "p_adjusted": 1e-9});
        s.decide_finding(ids[0], FindingState::Confirmed, Some(&cmp), Some("confirmed by confirm-1"), "t9").unwrap();
        s.decide_finding(ids[1], FindingState::NotConfirmed, None, None, "t9").unwrap();
        let all = s.findings_of_schedule("weekly").unwrap();
        let got: Vec<_> = all
            .iter()
            .map(|f| (f.due_utc.as_str(), f.state, f.confirm_campaign.as_deref(), f.decided_at.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("d1", FindingState::Confirming, None, None),
                ("d2", FindingState::Confirmed, Some("confirm-1"), Some("t9")),
                ("d2", FindingState::NotConfirmed, Some("confirm-1"), Some("t9")),
            ]
        );
        assert_eq!((all[1].confirm.as_ref(), all[1].note.as_deref()), (Some(&cmp), Some("confirmed by confirm-1")));
        assert!(s.findings_of_schedule("other").unwrap().is_empty());
    }
}
