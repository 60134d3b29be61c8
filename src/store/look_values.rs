//! What a sequential campaign's look reads (`runner/look.rs`): each attempt's status and
//! untether mode and its measurements' metrics and values, from the rows a report reads
//! (`attempt_report` and the measurements in its id ranges), and nothing else: no states,
//! series or attestations, which `Store::attempts` would load for every attempt at every
//! look.

use super::backend::vals;
use super::{AttemptRecord, AttemptStatus, Store, StoreError};
use crate::measure::UntetherMode;

/// One attempt as a look reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct LookAttempt {
    pub trial_idx: u32,
    pub attempt: u32,
    pub valid: bool,
    pub untether: Option<UntetherMode>,
    /// (metric, value) in recorded order.
    pub values: Vec<(String, f64)>,
}

impl From<&AttemptRecord> for LookAttempt {
    fn from(a: &AttemptRecord) -> Self {
        LookAttempt {
            trial_idx: a.trial_idx,
            attempt: a.attempt,
            valid: a.status == AttemptStatus::Valid,
            untether: a.untether,
            values: a.measurements.iter().map(|m| (m.metric.clone(), m.value)).collect(),
        }
    }
}

impl Store {
    /// Campaign `id`'s attempts in (trial, attempt) order, each with its measurements, in
    /// one read transaction.
    pub fn look_values(&self, id: &str) -> Result<Vec<LookAttempt>, StoreError> {
        let id = id.to_string();
        let read = self.db.call(move |c| {
            c.read_transaction(|c| {
                let mut out: Vec<LookAttempt> = Vec::new();
                c.query_each(
                    "SELECT trial_idx, attempt, status, untether FROM attempt_report
                     WHERE campaign = ?1 ORDER BY trial_idx, attempt",
                    &vals![id.as_str()],
                    &mut |r| {
                        out.push(LookAttempt {
                            trial_idx: r.get(0)?,
                            attempt: r.get(1)?,
                            valid: r.text(2)? == Some("valid"),
                            untether: r.text(3)?.and_then(UntetherMode::parse),
                            values: Vec::new(),
                        });
                        Ok(())
                    },
                )?;
                let mut at = 0;
                c.query_each(
                    "SELECT r.trial_idx, r.attempt, m.metric, m.value
                     FROM attempt_report r JOIN measurements m ON m.id BETWEEN r.measurements_from AND r.measurements_to
                     WHERE r.campaign = ?1 AND m.campaign = r.campaign AND m.trial_idx = r.trial_idx
                       AND m.attempt = r.attempt
                     ORDER BY r.trial_idx, r.attempt, m.seq",
                    &vals![id.as_str()],
                    &mut |r| {
                        let key: (u32, u32) = (r.get(0)?, r.get(1)?);
                        // Both in key order: one pass.
                        while at < out.len() && (out[at].trial_idx, out[at].attempt) < key {
                            at += 1;
                        }
                        if let Some(a) = out.get_mut(at).filter(|a| (a.trial_idx, a.attempt) == key) {
                            a.values.push((r.get(2)?, r.get(3)?));
                        }
                        Ok(())
                    },
                )?;
                Ok(out)
            })
        })?;
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::UntetherMode;
    use crate::store::NewCampaign;
    use crate::testing::fixture;
    use crate::testing::postgres::on_both;

    on_both!(reads_each_attempt_as_recorded);

    /// The store gives back what was recorded: every attempt (those without measurements
    /// too), its status, mode and values in order.
    fn reads_each_attempt_as_recorded(s: &Store) {
        let mut data = fixture::records("c1");
        let c = &data.campaign;
        s.create_campaign(
            &NewCampaign {
                id: c.id.clone(),
                runbook_name: c.runbook_name.clone(),
                runbook_path: c.runbook_path.clone(),
                runbook_text: String::new(),
                runbook_sha256: c.runbook_sha256.clone(),
                lab_text: String::new(),
                lab_sha256: c.lab_sha256.clone(),
                content_hashes: c.content_hashes.clone(),
                tool_version: c.tool_version.clone(),
                seed: c.seed,
                created_at: c.created_at.clone(),
                planned_trials: data.trials.iter().map(|t| t.row.clone()).collect(),
                plan_json: "{}".into(),
            },
            2,
            1,
        )
        .unwrap();
        data.attempts[0].untether = Some(UntetherMode::SoftUntethered);
        data.attempts[1].measurements.clear();
        for a in &data.attempts {
            s.record_attempt(a.clone()).unwrap();
        }
        let mut want: Vec<LookAttempt> = data.attempts.iter().map(LookAttempt::from).collect();
        want.sort_by_key(|a| (a.trial_idx, a.attempt));
        assert_eq!(s.look_values("c1").unwrap(), want);
        assert!(s.look_values("other").unwrap().is_empty());
    }
}
