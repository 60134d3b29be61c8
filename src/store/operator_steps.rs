//! The operator desk in the store: steps a runner asks, answered from any process.
//!
//! Every change of a step's status is one conditional `UPDATE … WHERE status = 'pending'`,
//! so an answer and an expiry that race settle on exactly one of them.

use rusqlite::params;

use super::backend::{Conn, Row, read_all, vals};
use super::error::StoreError;
use super::records::{Attestation, NewStep, StepRow, StepStatus};
use super::store::Store;

impl Store {
    /// Puts a step on the desk (pending); returns its id.
    pub fn ask_step(&self, s: &NewStep) -> Result<i64, StoreError> {
        let row = vals![
            &s.campaign,
            &s.device,
            s.trial_key.clone(),
            s.attempt,
            &s.step,
            &s.when,
            &s.text,
            serde_json::to_string(&s.attest)?,
            &s.asked_at,
            &s.deadline
        ];
        Ok(self.db.call(move |c| {
            c.query(
                "INSERT INTO operator_steps (campaign, device, trial_key, attempt, step, step_when, text, attest,
                    asked_at, deadline, status)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'pending') RETURNING id",
                &row,
            )?[0]
                .read::<i64>()
        })?)
    }

    pub fn step(&self, id: i64) -> Result<Option<StepRow>, StoreError> {
        let sql = format!("SELECT {} FROM operator_steps WHERE id = ?1", StepRow::COLUMNS);
        let row = self.db.call(move |c| c.query_opt(&sql, &vals![id]))?;
        Ok(row.as_ref().map(Row::read).transpose()?)
    }

    /// Steps waiting for an answer, oldest first; of one campaign or of all.
    pub fn pending_steps(&self, campaign: Option<&str>) -> Result<Vec<StepRow>, StoreError> {
        let sql = format!(
            "SELECT {} FROM operator_steps WHERE status = 'pending' AND (CAST(?1 AS TEXT) IS NULL OR campaign = ?1)
             ORDER BY id",
            StepRow::COLUMNS
        );
        let campaign = vals![campaign];
        let rows = self.db.call(move |c| c.query(&sql, &campaign))?;
        Ok(read_all(&rows)?)
    }

    /// Answers a pending step. False when it is no longer pending (answered, expired or
    /// abandoned meanwhile).
    pub fn answer_step(
        &self,
        id: i64,
        by: &str,
        at: &str,
        values: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<bool, StoreError> {
        let row = vals![id, by, at, serde_json::to_string(values)?];
        let n = self.db.call(move |c| {
            c.execute(
                "UPDATE operator_steps SET status = 'answered', answered_by = ?2, answered_at = ?3, answer = ?4
                 WHERE id = ?1 AND status = 'pending'",
                &row,
            )
        })?;
        Ok(n == 1)
    }

    /// Closes a pending step unanswered (`Expired` or `Abandoned`). False when it was
    /// answered first.
    pub fn close_step(&self, id: i64, status: StepStatus) -> Result<bool, StoreError> {
        let row = vals![id, status.as_str()];
        let n = self.db.call(move |c| {
            c.execute("UPDATE operator_steps SET status = ?2 WHERE id = ?1 AND status = 'pending'", &row)
        })?;
        Ok(n == 1)
    }

    /// Steps a crashed runner of `campaign` left pending: nobody waits for them any more.
    pub fn abandon_steps(&self, campaign: &str) -> Result<usize, StoreError> {
        let campaign = vals![campaign];
        let n = self.db.call(move |c| {
            c.execute(
                "UPDATE operator_steps SET status = 'abandoned' WHERE campaign = ?1 AND status = 'pending'",
                &campaign,
            )
        })?;
        Ok(n as usize)
    }

    /// The newest attestation of each (device, step) in the store: (device, campaign, it).
    pub fn latest_attestations(&self) -> Result<Vec<(String, String, Attestation)>, StoreError> {
        let rows = self.db.call(|c| {
            c.query(
                "SELECT COALESCE(a.device, t.device), x.campaign, x.step, x.step_when, x.text, x.answered_by,
                        x.answered_at, x.answer
                 FROM attestations x
                 JOIN attempts a ON a.campaign = x.campaign AND a.trial_idx = x.trial_idx AND a.attempt = x.attempt
                 JOIN trials t ON t.campaign = x.campaign AND t.idx = x.trial_idx
                 ORDER BY x.answered_at DESC",
                &[],
            )
        })?;
        let mut out: Vec<(String, String, Attestation)> = Vec::new();
        for r in &rows {
            let row: (String, String, Attestation) = r.read()?;
            if !out.iter().any(|(d, _, a)| *d == row.0 && a.step == row.2.step) {
                out.push(row);
            }
        }
        out.sort_by(|a, b| (&a.0, &a.2.step).cmp(&(&b.0, &b.2.step)));
        Ok(out)
    }
}

/// An attestation with its (trial, attempt).
pub(super) type AttemptAttestation = ((u32, u32), Attestation);

/// Every attestation of a campaign, by trial, attempt and as given.
pub(super) fn attestation_rows(c: &mut dyn Conn, campaign: &str) -> Result<Vec<AttemptAttestation>, StoreError> {
    let rows = c.query(
        &format!(
            "SELECT trial_idx, attempt, {} FROM attestations WHERE campaign = ?1 ORDER BY trial_idx, attempt, seq",
            Attestation::COLUMNS
        ),
        &vals![campaign],
    )?;
    Ok(read_all(&rows)?)
}

pub(super) fn insert_attestations(
    tx: &rusqlite::Transaction<'_>,
    campaign: &str,
    trial_idx: u32,
    attempt: u32,
    list: &[Attestation],
) -> Result<(), StoreError> {
    let mut st = tx.prepare(
        "INSERT INTO attestations (campaign, trial_idx, attempt, seq, step, step_when, text, answered_by,
            answered_at, answer)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for (seq, a) in list.iter().enumerate() {
        st.execute(params![
            campaign,
            trial_idx,
            attempt,
            seq as u32,
            a.step,
            a.when,
            a.text,
            a.by,
            a.at,
            serde_json::to_string(&a.values)?
        ])?;
    }
    Ok(())
}
