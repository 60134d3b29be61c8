//! Schedule slots (docs/schedule.md): one row per (schedule, due time).
//!
//! A runner owns a slot by inserting its row inside an immediate transaction
//! (`INSERT … ON CONFLICT DO NOTHING`): of two runners racing, one inserts, the other
//! finds the row. Taking over a slot whose runner died is one conditional `UPDATE`.

use super::ProcessId;
use super::process_id::start_from_column;
use serde::Serialize;

use super::backend::{Columns, DbError, FromRow, Row, Value, read_all, vals};
use super::error::StoreError;
use super::store::Store;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SlotState {
    /// A runner (claimed_pid on claimed_host) owns it and may be running its campaign.
    Claimed,
    /// Its campaign was stopped (SIGTERM, Ctrl-C, devices gone); the next runner resumes it.
    Interrupted,
    /// Its campaign ended; `outcome` says how.
    Finished,
    /// Never run: `skipped_because` says why.
    Skipped,
}

impl SlotState {
    pub fn as_str(self) -> &'static str {
        match self {
            SlotState::Claimed => "claimed",
            SlotState::Interrupted => "interrupted",
            SlotState::Finished => "finished",
            SlotState::Skipped => "skipped",
        }
    }
    fn parse(s: &str) -> Self {
        match s {
            "claimed" => SlotState::Claimed,
            "interrupted" => SlotState::Interrupted,
            "skipped" => SlotState::Skipped,
            _ => SlotState::Finished,
        }
    }
}

/// One slot's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlotRow {
    pub schedule: String,
    /// RFC 3339 UTC, seconds: `2026-03-29T01:00:00Z`.
    pub due_utc: String,
    pub state: SlotState,
    pub claimed_at: Option<String>,
    pub claimed_pid: Option<u32>,
    /// When the claimant process started (see [`ProcessId`]); `None` for rows written before.
    #[serde(skip)]
    pub claimed_start: Option<u64>,
    pub claimed_host: Option<String>,
    pub campaign: Option<String>,
    pub finished_at: Option<String>,
    pub outcome: Option<String>,
    pub skipped_because: Option<String>,
}

/// What claiming a slot came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This runner owns it now.
    Won,
    /// Another runner's row was there first.
    Taken(Box<SlotRow>),
}

const COLUMNS: &str = "schedule, due_utc, state, claimed_at, claimed_pid, claimed_host, campaign, finished_at, \
outcome, skipped_because, claimed_start";

/// From [`COLUMNS`].
impl FromRow<'_> for SlotRow {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(SlotRow {
            schedule: c.get()?,
            due_utc: c.get()?,
            state: SlotState::parse(&c.get::<String>()?),
            claimed_at: c.get()?,
            claimed_pid: c.get()?,
            claimed_host: c.get()?,
            campaign: c.get()?,
            finished_at: c.get()?,
            outcome: c.get()?,
            skipped_because: c.get()?,
            claimed_start: start_from_column(c.get()?),
        })
    }
}

impl SlotRow {
    /// The runner process that claimed it (alive or not: ask it).
    pub fn claimant(&self) -> Option<ProcessId> {
        self.claimed_pid.map(|pid| ProcessId { pid, start: self.claimed_start })
    }
}

/// Who claims, and when.
#[derive(Debug, Clone)]
pub struct Claimant<'a> {
    pub pid: u32,
    pub host: &'a str,
    pub at: &'a str,
}

impl Store {
    /// When a runner first saw `schedule`; records `now` if none has.
    pub fn schedule_first_seen(&self, schedule: &str, now: &str) -> Result<String, StoreError> {
        let row = vals![schedule, now];
        Ok(self.db.call(move |c| {
            c.execute(
                "INSERT INTO schedules_seen (schedule, first_seen_utc) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                &row,
            )?;
            c.query("SELECT first_seen_utc FROM schedules_seen WHERE schedule = ?1", &row[..1])?[0].read()
        })?)
    }

    /// When a runner first saw `schedule`, without recording anything.
    pub fn schedule_seen(&self, schedule: &str) -> Result<Option<String>, StoreError> {
        let row = vals![schedule];
        let seen = self
            .db
            .call(move |c| c.query_opt("SELECT first_seen_utc FROM schedules_seen WHERE schedule = ?1", &row))?;
        Ok(seen.as_ref().map(Row::read).transpose()?)
    }

    fn slot_rows(&self, tail: &str, params: Vec<Value>) -> Result<Vec<SlotRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM schedule_slots {tail}");
        let rows = self.db.call(move |c| c.query(&sql, &params))?;
        Ok(read_all(&rows)?)
    }

    /// The schedule's latest slot, whatever its state.
    pub fn last_slot(&self, schedule: &str) -> Result<Option<SlotRow>, StoreError> {
        Ok(self.slot_rows("WHERE schedule = ?1 ORDER BY due_utc DESC LIMIT 1", vals![schedule].to_vec())?.pop())
    }

    pub fn slot(&self, schedule: &str, due_utc: &str) -> Result<Option<SlotRow>, StoreError> {
        Ok(self.slot_rows("WHERE schedule = ?1 AND due_utc = ?2", vals![schedule, due_utc].to_vec())?.pop())
    }

    /// Every slot, of one schedule or all, oldest first.
    pub fn slots(&self, schedule: Option<&str>) -> Result<Vec<SlotRow>, StoreError> {
        self.slot_rows(
            "WHERE CAST(?1 AS TEXT) IS NULL OR schedule = ?1 ORDER BY due_utc, schedule",
            vals![schedule].to_vec(),
        )
    }

    /// Slots claimed or interrupted: campaigns that may need a runner.
    pub fn unfinished_slots(&self) -> Result<Vec<SlotRow>, StoreError> {
        self.slot_rows("WHERE state IN ('claimed', 'interrupted') ORDER BY due_utc, schedule", Vec::new())
    }

    /// Claims the slot `(schedule, due_utc)` for `by` with its campaign id, and records the
    /// missed slots `skipped` (due time, reason) with it, in one transaction; only the
    /// runner that inserts the claim records them.
    pub fn claim_slot(
        &self,
        schedule: &str,
        due_utc: &str,
        campaign: Option<&str>,
        by: &Claimant<'_>,
        skipped: &[(String, String)],
    ) -> Result<Claim, StoreError> {
        let claim = vals![schedule, due_utc, by.at, by.pid, by.host, campaign, ProcessId::of(by.pid).start_column()];
        let skipped: Vec<_> = skipped.iter().map(|(due, why)| vals![schedule, due, why, by.at]).collect();
        // One writing transaction (SQLite: IMMEDIATE, the write lock at BEGIN; PostgreSQL:
        // the insert waits for a competitor's uncommitted one), so the insert and the read
        // of a competitor's row see one state.
        let taken = self.db.call(move |c| {
            c.transaction(|c| {
                let inserted = c.execute(
                    "INSERT INTO schedule_slots (schedule, due_utc, state, claimed_at, claimed_pid, claimed_host,
                        campaign, claimed_start)
                     VALUES (?1, ?2, 'claimed', ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
                    &claim,
                )?;
                if inserted == 0 {
                    let sql = format!("SELECT {COLUMNS} FROM schedule_slots WHERE schedule = ?1 AND due_utc = ?2");
                    return Ok(Some(c.query(&sql, &claim[..2])?.remove(0)));
                }
                for row in &skipped {
                    c.execute(
                        "INSERT INTO schedule_slots (schedule, due_utc, state, skipped_because, finished_at)
                         VALUES (?1, ?2, 'skipped', ?3, ?4) ON CONFLICT DO NOTHING",
                        row,
                    )?;
                }
                Ok(None)
            })
        })?;
        Ok(match taken {
            Some(row) => Claim::Taken(Box::new(row.read()?)),
            None => Claim::Won,
        })
    }

    /// Takes over an unfinished slot as it was seen (`seen`: same state and pid), for `by`.
    /// False when another runner changed it first.
    pub fn take_over_slot(&self, seen: &SlotRow, by: &Claimant<'_>) -> Result<bool, StoreError> {
        let row = vals![
            &seen.schedule,
            &seen.due_utc,
            by.at,
            by.pid,
            by.host,
            seen.state.as_str(),
            seen.claimed_pid,
            ProcessId::of(by.pid).start_column()
        ];
        let n = self.db.call(move |c| {
            c.execute(
                "UPDATE schedule_slots SET state = 'claimed', claimed_at = ?3, claimed_pid = ?4, claimed_host = ?5,
                    claimed_start = ?8
                 WHERE schedule = ?1 AND due_utc = ?2 AND state = ?6 AND claimed_pid IS NOT DISTINCT FROM ?7",
                &row,
            )
        })?;
        Ok(n == 1)
    }

    /// Names the campaign a claimed slot runs (one started after its claim).
    pub fn set_slot_campaign(&self, schedule: &str, due_utc: &str, campaign: &str) -> Result<(), StoreError> {
        let row = vals![schedule, due_utc, campaign];
        self.db.call(move |c| {
            c.execute("UPDATE schedule_slots SET campaign = ?3 WHERE schedule = ?1 AND due_utc = ?2", &row)
        })?;
        Ok(())
    }

    /// Ends a claimed slot: `finished` with its outcome, or `interrupted` (resumable).
    pub fn end_slot(
        &self,
        schedule: &str,
        due_utc: &str,
        state: SlotState,
        outcome: &str,
        at: &str,
    ) -> Result<(), StoreError> {
        let row = vals![schedule, due_utc, state.as_str(), outcome, at];
        self.db.call(move |c| {
            c.execute(
                // A slot skipped at its end (its devices stayed busy) says why as skipped ones do.
                "UPDATE schedule_slots SET state = ?3, outcome = ?4, finished_at = ?5,
                    skipped_because = CASE WHEN ?3 = 'skipped' THEN ?4 ELSE skipped_because END
                 WHERE schedule = ?1 AND due_utc = ?2",
                &row,
            )
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::testing::postgres::on_both!(
        a_slot_is_claimed_once_and_the_loser_sees_the_winner,
        a_take_over_happens_once,
        first_sight_is_kept,
        two_runners_racing_for_a_slot_claim_it_once,
    );

    fn a_slot_is_claimed_once_and_the_loser_sees_the_winner(s: &Store) {
        let a = Claimant { pid: 10, host: "h", at: "2026-03-29T01:00:05Z" };
        let b = Claimant { pid: 11, host: "h", at: "2026-03-29T01:00:06Z" };
        let skipped = vec![("2026-03-22T01:30:00Z".to_string(), "missed".to_string())];
        assert_eq!(s.claim_slot("w", "2026-03-29T01:00:00Z", Some("c-1"), &a, &skipped).unwrap(), Claim::Won);
        let Claim::Taken(row) = s.claim_slot("w", "2026-03-29T01:00:00Z", Some("c-2"), &b, &[]).unwrap() else {
            panic!("claimed twice");
        };
        assert_eq!((row.claimed_pid, row.campaign.as_deref()), (Some(10), Some("c-1")));
        let all = s.slots(Some("w")).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].state, all[0].skipped_because.as_deref()), (SlotState::Skipped, Some("missed")));
        assert_eq!(s.last_slot("w").unwrap().unwrap().due_utc, "2026-03-29T01:00:00Z");
    }

    fn a_take_over_happens_once(s: &Store) {
        let a = Claimant { pid: 10, host: "h", at: "t0" };
        s.claim_slot("w", "d", None, &a, &[]).unwrap();
        let seen = s.slot("w", "d").unwrap().unwrap();
        assert!(s.take_over_slot(&seen, &Claimant { pid: 20, host: "h", at: "t1" }).unwrap());
        assert!(!s.take_over_slot(&seen, &Claimant { pid: 21, host: "h", at: "t2" }).unwrap());
        assert_eq!(s.slot("w", "d").unwrap().unwrap().claimed_pid, Some(20));
        s.end_slot("w", "d", SlotState::Finished, "ok", "t3").unwrap();
        assert!(s.unfinished_slots().unwrap().is_empty());
    }

    fn first_sight_is_kept(s: &Store) {
        assert_eq!(s.schedule_seen("w").unwrap(), None);
        assert_eq!(s.schedule_first_seen("w", "t0").unwrap(), "t0");
        assert_eq!(s.schedule_first_seen("w", "t1").unwrap(), "t0");
    }

    /// Eight runners (threads, each with its own connection) claim one slot at once.
    fn two_runners_racing_for_a_slot_claim_it_once(s: &Store) {
        let location = s.location().clone();
        let racers: Vec<_> = (0..8)
            .map(|i| {
                // A second handle on the same store: its own connection.
                let s = match s.dialect() {
                    crate::store::Dialect::Sqlite => Store::open(location.sqlite_file().unwrap()).unwrap(),
                    crate::store::Dialect::Postgres => s.clone(),
                };
                std::thread::spawn(move || {
                    let by = Claimant { pid: 100 + i, host: "h", at: "t0" };
                    s.claim_slot("w", "d", Some(&format!("c-{i}")), &by, &[]).unwrap() == Claim::Won
                })
            })
            .collect();
        let won = racers.into_iter().map(|r| r.join().unwrap()).filter(|w| *w).count();
        assert_eq!(won, 1);
        assert_eq!(s.slots(None).unwrap().len(), 1);
    }

    #[test]
    fn a_claim_records_when_its_runner_started() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("lab.db")).unwrap();
        let me = Claimant { pid: std::process::id(), host: "h", at: "t0" };
        assert_eq!(s.claim_slot("w", "d", None, &me, &[]).unwrap(), Claim::Won);
        let row = s.slot("w", "d").unwrap().unwrap();
        assert_eq!(row.claimant(), Some(ProcessId::current()));
        assert!(row.claimant().unwrap().alive());
        s.lock().unwrap().execute("UPDATE schedule_slots SET claimed_start = claimed_start + 1", []).unwrap();
        assert!(!s.slot("w", "d").unwrap().unwrap().claimant().unwrap().alive(), "a reused pid is not the claimant");
    }
}
