//! The operator desk in the store: steps a runner asks, answered from any process.
//!
//! Every change of a step's status is one conditional `UPDATE … WHERE status = 'pending'`,
//! so an answer and an expiry that race settle on exactly one of them.

use rusqlite::params;

use super::backend::{Conn, DbError, Row, vals};
use super::error::StoreError;
use super::records::{Attestation, NewStep, StepRow, StepStatus};
use super::store::Store;

const STEP_COLUMNS: &str =
    "id, campaign, device, trial_key, attempt, step, step_when, text, attest, asked_at, deadline,
    status, answered_at, answered_by, answer";

fn step_row(r: &Row) -> Result<StepRow, DbError> {
    let attest: String = r.get(8)?;
    let status: String = r.get(11)?;
    let answer: Option<String> = r.get(14)?;
    Ok(StepRow {
        id: r.get(0)?,
        asked: NewStep {
            campaign: r.get(1)?,
            device: r.get(2)?,
            trial_key: r.get(3)?,
            attempt: r.get(4)?,
            step: r.get(5)?,
            when: r.get(6)?,
            text: r.get(7)?,
            attest: serde_json::from_str(&attest).unwrap_or_default(),
            asked_at: r.get(9)?,
            deadline: r.get(10)?,
        },
        status: StepStatus::parse(&status).unwrap_or(StepStatus::Abandoned),
        answered_at: r.get(12)?,
        answered_by: r.get(13)?,
        values: answer.and_then(|a| serde_json::from_str(&a).ok()).unwrap_or_default(),
    })
}

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
                .get::<i64>(0)
        })?)
    }

    pub fn step(&self, id: i64) -> Result<Option<StepRow>, StoreError> {
        let sql = format!("SELECT {STEP_COLUMNS} FROM operator_steps WHERE id = ?1");
        let row = self.db.call(move |c| c.query_opt(&sql, &vals![id]))?;
        Ok(row.as_ref().map(step_row).transpose()?)
    }

    /// Steps waiting for an answer, oldest first; of one campaign or of all.
    pub fn pending_steps(&self, campaign: Option<&str>) -> Result<Vec<StepRow>, StoreError> {
        let sql = format!(
            "SELECT {STEP_COLUMNS} FROM operator_steps WHERE status = 'pending' AND (CAST(?1 AS TEXT) IS NULL OR campaign = ?1)
             ORDER BY id"
        );
        let campaign = vals![campaign];
        let rows = self.db.call(move |c| c.query(&sql, &campaign))?;
        Ok(rows.iter().map(step_row).collect::<Result<_, _>>()?)
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
            let row = (r.get::<String>(0)?, r.get::<String>(1)?, attestation(r, 2)?);
            if !out.iter().any(|(d, _, a)| *d == row.0 && a.step == row.2.step) {
                out.push(row);
            }
        }
        out.sort_by(|a, b| (&a.0, &a.2.step).cmp(&(&b.0, &b.2.step)));
        Ok(out)
    }
}

/// An attestation from six columns from `at`: step, step_when, text, answered_by,
/// answered_at, answer.
fn attestation(r: &Row, at: usize) -> Result<Attestation, DbError> {
    let answer: String = r.get(at + 5)?;
    Ok(Attestation {
        step: r.get(at)?,
        when: r.get(at + 1)?,
        text: r.get(at + 2)?,
        by: r.get(at + 3)?,
        at: r.get(at + 4)?,
        values: serde_json::from_str(&answer).unwrap_or_default(),
    })
}

/// An attestation with its (trial, attempt).
pub(super) type AttemptAttestation = ((u32, u32), Attestation);

/// Every attestation of a campaign, by trial, attempt and as given.
pub(super) fn attestation_rows(c: &mut dyn Conn, campaign: &str) -> Result<Vec<AttemptAttestation>, StoreError> {
    let rows = c.query(
        "SELECT trial_idx, attempt, step, step_when, text, answered_by, answered_at, answer FROM attestations
         WHERE campaign = ?1 ORDER BY trial_idx, attempt, seq",
        &vals![campaign],
    )?;
    Ok(rows.iter().map(|r| Ok(((r.get(0)?, r.get(1)?), attestation(r, 2)?))).collect::<Result<_, DbError>>()?)
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
