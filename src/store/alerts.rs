//! Schedule alerts: one row per slot and channel, so that a slot alerts once per channel.
//!
//! A runner inserts the row (`sending`) before it delivers and ends it after. A runner
//! that finds the row still `sending` (its runner died mid-delivery) sends again: delivery
//! is at-least-once, and receivers dedupe by the payload's `alert_id`.

use serde::{Deserialize, Serialize};

use super::backend::{Columns, DbError, FromRow, Row, read_all, vals};
use super::error::StoreError;
use super::store::Store;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertState {
    /// Being delivered, or its runner died while delivering.
    Sending,
    Sent,
    /// Every try failed; `error` says why.
    Failed,
}

impl AlertState {
    pub fn as_str(self) -> &'static str {
        match self {
            AlertState::Sending => "sending",
            AlertState::Sent => "sent",
            AlertState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "sending" => AlertState::Sending,
            "sent" => AlertState::Sent,
            "failed" => AlertState::Failed,
            _ => return None,
        })
    }
}

/// One slot's alert on one channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AlertRow {
    pub schedule: String,
    pub due_utc: String,
    /// `webhook` or `command`.
    pub channel: String,
    /// The URL, or the command's argv as one line.
    pub target: String,
    /// The JSON sent, as sent.
    pub payload: String,
    pub state: AlertState,
    pub tries: u32,
    /// What the receiver answered (bounded), if anything.
    pub response: Option<String>,
    pub error: Option<String>,
    /// When the row was last written.
    pub at: String,
}

const COLUMNS: &str = "schedule, due_utc, channel, target, payload, state, tries, response, error, at";

/// From [`COLUMNS`].
impl FromRow<'_> for AlertRow {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(AlertRow {
            schedule: c.get()?,
            due_utc: c.get()?,
            channel: c.get()?,
            target: c.get()?,
            payload: c.get()?,
            state: {
                let state: String = c.get()?;
                AlertState::parse(&state).ok_or_else(|| DbError::Type(format!("unknown alert state `{state}`")))?
            },
            tries: c.get()?,
            response: c.get()?,
            error: c.get()?,
            at: c.get()?,
        })
    }
}

impl Store {
    /// Starts delivering `alert` (stored as `sending`, whatever its state says). True when
    /// this runner should send: it inserted the row, or the row was left `sending` by a
    /// runner that did not finish. False when the slot's alert on this channel was
    /// already sent or failed.
    pub fn begin_alert(&self, alert: &AlertRow) -> Result<bool, StoreError> {
        let a = alert.clone();
        // One writing transaction: the insert and the read of an earlier row see one state.
        Ok(self.db.call(move |c| {
            c.transaction(|c| {
                let inserted = c.execute(
                    "INSERT INTO schedule_alerts (schedule, due_utc, channel, target, payload, state, tries, response,
                        error, at)
                     VALUES (?1, ?2, ?3, ?4, ?5, 'sending', ?6, ?7, ?8, ?9) ON CONFLICT DO NOTHING",
                    &vals![
                        &a.schedule,
                        &a.due_utc,
                        &a.channel,
                        &a.target,
                        &a.payload,
                        a.tries,
                        a.response.clone(),
                        a.error.clone(),
                        &a.at
                    ],
                )?;
                if inserted == 1 {
                    return Ok(true);
                }
                let state = c.query_opt(
                    "SELECT state FROM schedule_alerts WHERE schedule = ?1 AND due_utc = ?2 AND channel = ?3",
                    &vals![&a.schedule, &a.due_utc, &a.channel],
                )?;
                Ok(state.as_ref().map(Row::read::<String>).transpose()?.as_deref()
                    == Some(AlertState::Sending.as_str()))
            })
        })?)
    }

    /// Ends a delivery: the row of `alert`'s slot and channel takes its state, tries,
    /// response, error and time.
    pub fn end_alert(&self, alert: &AlertRow) -> Result<(), StoreError> {
        let a = alert.clone();
        self.db.call(move |c| {
            c.execute(
                "UPDATE schedule_alerts SET state = ?4, tries = ?5, response = ?6, error = ?7, at = ?8
                 WHERE schedule = ?1 AND due_utc = ?2 AND channel = ?3",
                &vals![
                    &a.schedule,
                    &a.due_utc,
                    &a.channel,
                    a.state.as_str(),
                    a.tries,
                    a.response.clone(),
                    a.error.clone(),
                    &a.at
                ],
            )
        })?;
        Ok(())
    }

    /// Every alert of a schedule, oldest slot first.
    pub fn alerts_of_schedule(&self, schedule: &str) -> Result<Vec<AlertRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM schedule_alerts WHERE schedule = ?1 ORDER BY due_utc, channel");
        let schedule = vals![schedule];
        let rows = self.db.call(move |c| c.query(&sql, &schedule))?;
        Ok(read_all(&rows)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(due: &str, channel: &str) -> AlertRow {
        AlertRow {
            schedule: "weekly".into(),
            due_utc: due.into(),
            channel: channel.into(),
            target: "http://127.0.0.1:9/hook".into(),
            payload: r#"{"alert_id":"weekly/d1"}"#.into(),
            state: AlertState::Sending,
            tries: 0,
            response: None,
            error: None,
            at: "t0".into(),
        }
    }

    crate::testing::postgres::on_both!(an_alert_is_sent_once_unless_its_runner_died_while_sending);

    fn an_alert_is_sent_once_unless_its_runner_died_while_sending(s: &Store) {
        let a = alert("d1", "webhook");
        assert!(s.begin_alert(&a).unwrap(), "the first runner sends");
        assert!(s.begin_alert(&AlertRow { at: "t1".into(), ..a.clone() }).unwrap(), "still sending: resend");
        let sent = AlertRow { state: AlertState::Sent, tries: 2, response: Some("ok".into()), at: "t2".into(), ..a };
        s.end_alert(&sent).unwrap();
        assert!(!s.begin_alert(&alert("d1", "webhook")).unwrap(), "sent: not again");

        let cmd = alert("d1", "command");
        assert!(s.begin_alert(&cmd).unwrap(), "each channel on its own");
        let failed = AlertRow { state: AlertState::Failed, tries: 1, error: Some("exit 3".into()), ..cmd };
        s.end_alert(&failed).unwrap();
        assert!(!s.begin_alert(&alert("d1", "command")).unwrap(), "failed: not retried by the next runner");
        assert!(s.begin_alert(&alert("d0", "webhook")).unwrap());

        let all = s.alerts_of_schedule("weekly").unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!((all[0].due_utc.as_str(), all[0].state), ("d0", AlertState::Sending));
        assert_eq!(all[1], failed, "round trip; command sorts before webhook");
        assert_eq!(all[2], sent);
        assert!(s.alerts_of_schedule("other").unwrap().is_empty());
        for st in [AlertState::Sending, AlertState::Sent, AlertState::Failed] {
            assert_eq!(AlertState::parse(st.as_str()), Some(st));
        }
    }
}
