//! Campaigns the lab runs (docs/agents.md): submitted `queued` with a priority, taken by
//! the agents of their devices' hosts, cancelled from anywhere; the attempts agents begin
//! (so a killed agent's is recorded, never dropped), a campaign's events for `lab wait`,
//! and each look (or the end) decided by exactly one agent.

use serde::Serialize;

use super::backend::{Columns, Conn, DbError, FromRow, Row, Value, read_all, vals};
use super::error::StoreError;
use super::records::{CampaignStatus, NewCampaign};
use super::store::Store;
use super::wake::Channel;

/// The shape of a stored plan (`Plan`'s JSON and the trials' rows) this version runs.
/// Raised when a change means an older agent would run a newer plan differently: an agent
/// refuses a campaign whose format is above its own.
pub const PLAN_FORMAT: u32 = 1;

/// A submitted campaign with trials left on some of an agent's devices.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Claimable {
    pub campaign: String,
    pub priority: i32,
    pub plan_format: u32,
    pub status: CampaignStatus,
    /// The agent's devices with pending trials in it.
    pub devices: Vec<String>,
}

/// What `lab cancel` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelled {
    /// It was queued: it is gone.
    Removed,
    /// Agents run it: they stop it now; it is interrupted, and resumable.
    Stopping,
    /// Already over (done or interrupted): nothing to do.
    Ended(CampaignStatus),
    /// A `lab run` process runs it (not the agents), with this pid: Ctrl-C it there.
    RunByProcess(u32),
}

/// An attempt an agent began and has not recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct InFlight {
    pub campaign: String,
    pub trial_idx: u32,
    pub attempt: u32,
    pub device: String,
    /// The host of the agent that ran it, and its pid.
    pub host: String,
    pub pid: u32,
    pub started_at: String,
    pub artifact_dir: String,
}

impl FromRow<'_> for InFlight {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(InFlight {
            campaign: c.get()?,
            trial_idx: c.get()?,
            attempt: c.get()?,
            device: c.get()?,
            host: c.get()?,
            pid: c.get()?,
            started_at: c.get()?,
            artifact_dir: c.get()?,
        })
    }
}

/// Pending trials by campaign and device: no valid attempt, fewer attempts than allowed;
/// followed by `t.device IN (…)` and [`CLAIMABLE_ORDER`].
const CLAIMABLE: &str = "SELECT c.id, c.priority, c.plan_format, c.status, t.device
     FROM campaigns c JOIN trials t ON t.campaign = c.id
     WHERE c.submitted = 1 AND c.cancel_requested = 0 AND c.status IN ('queued', 'running')
       AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.campaign = t.campaign AND a.trial_idx = t.idx
                       AND a.status = 'valid')
       AND (SELECT COUNT(*) FROM attempts a WHERE a.campaign = t.campaign AND a.trial_idx = t.idx) < c.max_attempts";
const CLAIMABLE_ORDER: &str = "GROUP BY c.id, c.priority, c.plan_format, c.status, c.created_at, t.device
     ORDER BY c.priority DESC, c.created_at, c.id, t.device";

impl Store {
    /// Stores a new campaign `queued` for the lab's agents, with its priority.
    pub fn submit_campaign(&self, c: &NewCampaign, max_attempts: u32, priority: i32) -> Result<(), StoreError> {
        self.insert_campaign(c, max_attempts, None, Some(priority))
    }

    /// Queues an interrupted (or cancelled) campaign for the agents again: resumable.
    pub fn resubmit(&self, id: &str, priority: Option<i32>) -> Result<CampaignStatus, StoreError> {
        let r = vals![id, priority];
        let status = self.db.call(move |c| {
            c.transaction(|c| {
                let Some(row) = c.query_opt("SELECT status FROM campaigns WHERE id = ?1", &r[..1])? else {
                    return Ok(None);
                };
                let status: String = row.read()?;
                if status == "interrupted" {
                    c.execute(
                        "UPDATE campaigns SET status = 'queued', submitted = 1, cancel_requested = 0, runner_pid = NULL,
                            runner_start = NULL, finished_at = NULL, note = NULL, priority = COALESCE(?2, priority)
                         WHERE id = ?1",
                        &r,
                    )?;
                }
                Ok(Some(status))
            })
        })?;
        let status = status.ok_or_else(|| StoreError::NoCampaign(id.into()))?;
        Ok(CampaignStatus::parse(&status).unwrap_or(CampaignStatus::Done))
    }

    /// The submitted campaigns with pending trials on `devices`, first to run first, but
    /// for the campaigns `known` (those the agent runs or refused).
    pub fn claimable(&self, devices: &[String], known: &[String]) -> Result<Vec<Claimable>, StoreError> {
        if devices.is_empty() {
            return Ok(Vec::new());
        }
        // Only the agent's devices' trials are looked at: each look of each agent checked
        // every pending trial of the lab's campaigns for attempts (65 ms a look at 5 000
        // trials, on the database's CPU). Nor those of the campaigns it runs or refused
        // already (`known`), which it would drop: about 250 trials' attempts a look read
        // for nothing while four campaigns run.
        let marks = |from: usize, n: usize| (from..from + n).map(|k| format!("?{k}")).collect::<Vec<_>>().join(", ");
        let skip = if known.is_empty() {
            String::new()
        } else {
            format!(" AND c.id NOT IN ({})", marks(devices.len() + 1, known.len()))
        };
        let sql = format!("{CLAIMABLE} AND t.device IN ({}){skip} {CLAIMABLE_ORDER}", marks(1, devices.len()));
        let params: Vec<Value> = devices.iter().chain(known).map(Value::from).collect();
        let rows = self.db.call(move |c| c.query(&sql, &params))?;
        let mut out: Vec<Claimable> = Vec::new();
        for r in &rows {
            let ((campaign, priority, plan_format), (status, device)): ((String, i32, u32), (String, String)) =
                r.read()?;
            let status = CampaignStatus::parse(&status).unwrap_or(CampaignStatus::Queued);
            match out.last_mut() {
                Some(c) if c.campaign == campaign => c.devices.push(device),
                _ => out.push(Claimable { campaign, priority, plan_format, status, devices: vec![device] }),
            }
        }
        Ok(out)
    }

    /// A queued campaign is being run by agents now; false if it is no longer queued or
    /// running (cancelled meanwhile).
    ///
    /// Read first, written only while still queued: every agent's part asks this with its
    /// first free device, and twenty updates of the one row at once queued behind each
    /// other's row lock (p90 35–180 ms of a hand-off, docs/benchmarks.md, `agents`).
    pub fn start_submitted(&self, id: &str) -> Result<bool, StoreError> {
        let r = vals![id];
        let started = self.db.call(move |c| {
            let now = c
                .query_opt("SELECT status, cancel_requested FROM campaigns WHERE id = ?1", &r)?
                .map(|row| row.read::<(String, i64)>());
            match now.transpose()? {
                None | Some((_, 1)) => Ok(false),
                Some((status, _)) if status == CampaignStatus::Running.as_str() => Ok(true),
                Some(_) => c
                    .execute(
                        "UPDATE campaigns SET status = 'running' WHERE id = ?1 AND cancel_requested = 0
                            AND status IN ('queued', 'running')",
                        &r,
                    )
                    .map(|n| n > 0),
            }
        })?;
        Ok(started)
    }

    /// `lab cancel`: a queued campaign is removed; one agents run is stopped (they see
    /// `cancel_requested`) and left interrupted, resumable.
    pub fn cancel_campaign(&self, id: &str, at: &str) -> Result<Cancelled, StoreError> {
        let r = vals![id, at];
        let done = self.db.call(move |c| {
            c.transaction(|c| {
                let Some(row) =
                    c.query_opt("SELECT status, submitted, runner_pid FROM campaigns WHERE id = ?1", &r[..1])?
                else {
                    return Ok(None);
                };
                let (status, submitted, pid): (String, i64, Option<u32>) = row.read()?;
                let status = CampaignStatus::parse(&status).unwrap_or(CampaignStatus::Done);
                Ok(Some(match (status, submitted != 0) {
                    (CampaignStatus::Queued, _) => {
                        for table in ["campaign_events", "event_counters", "campaign_looks", "trials"] {
                            c.execute(&format!("DELETE FROM {table} WHERE campaign = ?1"), &r[..1])?;
                        }
                        c.execute("DELETE FROM campaigns WHERE id = ?1", &r[..1])?;
                        Cancelled::Removed
                    }
                    (CampaignStatus::Running, true) => {
                        c.execute(
                            "UPDATE campaigns SET cancel_requested = 1, status = 'interrupted', finished_at = ?2,
                                note = 'cancelled by `lab cancel`' WHERE id = ?1",
                            &r,
                        )?;
                        Cancelled::Stopping
                    }
                    (CampaignStatus::Running, false) => Cancelled::RunByProcess(pid.unwrap_or_default()),
                    (s, _) => Cancelled::Ended(s),
                }))
            })
        })?;
        done.ok_or_else(|| StoreError::NoCampaign(id.into()))
    }

    /// Of `ids`, those whose cancel was asked for.
    pub fn cancel_requested(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        let rows = self.db.call(|c| c.query("SELECT id FROM campaigns WHERE cancel_requested = 1", &[]))?;
        let asked: Vec<String> = read_all(&rows)?;
        Ok(asked.into_iter().filter(|a| ids.contains(a)).collect())
    }

    /// Whether a campaign was submitted (runs on agents) and its priority.
    pub fn submitted(&self, id: &str) -> Result<Option<i32>, StoreError> {
        let r = vals![id];
        let row = self.db.call(move |c| c.query_opt("SELECT submitted, priority FROM campaigns WHERE id = ?1", &r))?;
        let (submitted, priority): (i64, i32) = row.ok_or_else(|| StoreError::NoCampaign(id.into()))?.read()?;
        Ok((submitted != 0).then_some(priority))
    }

    /// Agents' attempts begin: [`Store::begin_attempt`] of each, in one statement (per
    /// hundred) and one commit, as the recording thread gathers them. A hundred or fewer
    /// need no transaction around their one statement (two round trips fewer).
    pub fn begin_attempts(&self, rows: &[InFlight]) -> Result<(), StoreError> {
        let rows: Vec<InFlight> = rows.to_vec();
        self.db.call(move |c| {
            let insert = |c: &mut dyn Conn| -> Result<(), DbError> {
                for chunk in rows.chunks(100) {
                    let values: Vec<String> = (0..chunk.len())
                        .map(|i| format!("({})", (1..=8).map(|k| format!("?{}", 8 * i + k)).collect::<Vec<_>>().join(", ")))
                        .collect();
                    let params: Vec<_> = chunk
                        .iter()
                        .flat_map(|a| {
                            vals![&a.campaign, a.trial_idx, a.attempt, &a.device, &a.host, a.pid, &a.started_at, &a.artifact_dir]
                                .to_vec()
                        })
                        .collect();
                    c.execute(
                        &format!(
                            "INSERT INTO attempts_in_flight (campaign, trial_idx, attempt, device, host, pid, started_at,
                                artifact_dir) VALUES {}
                             ON CONFLICT (campaign, trial_idx, attempt) DO UPDATE SET device = excluded.device,
                                host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,
                                artifact_dir = excluded.artifact_dir",
                            values.join(", ")
                        ),
                        &params,
                    )?;
                }
                Ok(())
            };
            if rows.len() <= 100 { insert(c) } else { c.transaction(insert) }
        })?;
        Ok(())
    }

    /// An agent begins an attempt: until it is recorded (`end_attempt`), a death leaves it here.
    pub fn begin_attempt(&self, a: &InFlight) -> Result<(), StoreError> {
        self.begin_attempts(std::slice::from_ref(a))
    }

    /// The attempt is recorded (or was abandoned and recorded as such).
    pub fn end_attempt(&self, campaign: &str, trial_idx: u32, attempt: u32) -> Result<(), StoreError> {
        let r = vals![campaign, trial_idx, attempt];
        self.db.call(move |c| {
            c.execute("DELETE FROM attempts_in_flight WHERE campaign = ?1 AND trial_idx = ?2 AND attempt = ?3", &r)
        })?;
        Ok(())
    }

    /// The attempts begun on `device` and not recorded, with whether each was recorded after
    /// all (a death between the record and its row's removal).
    pub fn in_flight_on(&self, device: &str) -> Result<Vec<(InFlight, bool)>, StoreError> {
        let r = vals![device];
        let rows = self.db.call(move |c| {
            c.query(
                "SELECT f.campaign, f.trial_idx, f.attempt, f.device, f.host, f.pid, f.started_at, f.artifact_dir,
                    EXISTS (SELECT 1 FROM attempts a WHERE a.campaign = f.campaign AND a.trial_idx = f.trial_idx
                            AND a.attempt = f.attempt)
                 FROM attempts_in_flight f WHERE f.device = ?1 ORDER BY f.started_at",
                &r,
            )
        })?;
        let read = |r: &Row| -> Result<(InFlight, bool), DbError> {
            let mut c = Columns::new(r);
            Ok((c.read()?, c.get()?))
        };
        Ok(rows.iter().map(read).collect::<Result<_, _>>()?)
    }

    /// Claims the look of `campaign` at `trials` planned trials (or its end): true for
    /// exactly one caller, whichever agent asks first.
    pub fn claim_look(&self, campaign: &str, trials: u32, host: &str, at: &str) -> Result<bool, StoreError> {
        let r = vals![campaign, trials, host, at];
        let n = self.db.call(move |c| {
            c.execute(
                "INSERT INTO campaign_looks (campaign, trials, host, at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (campaign, trials) DO NOTHING",
                &r,
            )
        })?;
        Ok(n == 1)
    }

    /// How many looks (and ends) of a campaign were claimed.
    pub fn looks_claimed(&self, campaign: &str) -> Result<u32, StoreError> {
        let r = vals![campaign];
        let row = self.db.call(move |c| c.query("SELECT COUNT(*) FROM campaign_looks WHERE campaign = ?1", &r))?;
        Ok(row[0].read::<i64>()? as u32)
    }

    /// How many trials a campaign has planned now.
    pub fn planned_count(&self, campaign: &str) -> Result<u32, StoreError> {
        let r = vals![campaign];
        let row = self.db.call(move |c| c.query("SELECT COUNT(*) FROM trials WHERE campaign = ?1", &r))?;
        Ok(row[0].read::<i64>()? as u32)
    }

    /// Appends events (JSON objects) to a campaign's stream, in order, after any others.
    pub fn append_events(&self, campaign: &str, at: &str, events: &[String]) -> Result<(), StoreError> {
        self.append(campaign, at, events, None)
    }

    /// [`Store::append_events`], then wakes `lab wait` ([`Channel::Events`] about the
    /// campaign): on PostgreSQL in the last insert's statement (`pg_notify` sends at its
    /// commit), one round trip for a trial's burst rather than two.
    pub fn append_events_told(&self, campaign: &str, at: &str, events: &[String]) -> Result<(), StoreError> {
        if matches!(self.db, super::backend::Db::Postgres(_)) {
            return self.append(campaign, at, events, Some(Channel::Events));
        }
        self.append(campaign, at, events, None)?;
        self.notify_about(Channel::Events, campaign)
    }

    fn append(&self, campaign: &str, at: &str, events: &[String], told: Option<Channel>) -> Result<(), StoreError> {
        let (campaign, at, events) = (campaign.to_string(), at.to_string(), events.to_vec());
        self.db.call(move |c| {
            let chunks = events.chunks(EVENTS_PER_INSERT).count();
            for (i, chunk) in events.chunks(EVENTS_PER_INSERT).enumerate() {
                append_chunk(c, &campaign, &at, chunk, told.filter(|_| i + 1 == chunks))?;
            }
            Ok(())
        })?;
        Ok(())
    }

    /// A campaign's events after number `after`, in order (at most `limit`).
    pub fn events_after(&self, campaign: &str, after: i64, limit: u32) -> Result<Vec<(i64, String)>, StoreError> {
        let r = vals![campaign, after, limit];
        let rows = self.db.call(move |c| {
            c.query("SELECT seq, event FROM campaign_events WHERE campaign = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3", &r)
        })?;
        Ok(read_all(&rows)?)
    }
}

/// Events per `INSERT` (2 parameters each, within SQLite's and PostgreSQL's limits).
const EVENTS_PER_INSERT: usize = 500;

/// Appends `events` (at most [`EVENTS_PER_INSERT`]) with the campaign's next numbers,
/// taken from its `event_counters` row. Agents append to one campaign at once: the row's
/// lock makes them take turns, each until its commit, so the numbers are committed in
/// order and a reader that has seen number n has seen every number below it. On
/// PostgreSQL it is one statement (the row locked for that statement alone: the agents'
/// turns are short); on SQLite, whose writes take turns anyway, a transaction.
/// `told`: on PostgreSQL, the channel the statement also notifies about the campaign.
fn append_chunk(
    c: &mut dyn Conn,
    campaign: &str,
    at: &str,
    events: &[String],
    told: Option<Channel>,
) -> Result<(), DbError> {
    let n = events.len() as i64;
    let bump = "INSERT INTO event_counters (campaign, seq) VALUES (?1, ?3)
                ON CONFLICT (campaign) DO UPDATE SET seq = event_counters.seq + excluded.seq";
    let mut params = vals![campaign, at, n].to_vec();
    params.extend(events.iter().map(Value::from));
    if c.dialect() == super::Dialect::Postgres {
        let rows: Vec<String> = (0..events.len()).map(|k| format!("({}, CAST(?{} AS TEXT))", k + 1, k + 4)).collect();
        let insert = format!(
            "INSERT INTO campaign_events (campaign, at, seq, event)
             SELECT ?1, ?2, n.seq - ?3 + x.k, x.e FROM n, (VALUES {}) AS x (k, e)",
            rows.join(", ")
        );
        let sql = match told {
            // A data-modifying `WITH` runs whether or not the rest reads it.
            Some(channel) => format!(
                "WITH n AS ({bump} RETURNING seq), e AS ({insert} RETURNING 1) SELECT pg_notify('{}', ?1)",
                channel.name()
            ),
            None => format!("WITH n AS ({bump} RETURNING seq) {insert}"),
        };
        c.execute(&sql, &params)?;
        return Ok(());
    }
    c.transaction(|c| {
        c.execute(bump, &params[..3])?;
        let last: i64 = c.query("SELECT seq FROM event_counters WHERE campaign = ?1", &params[..1])?[0].read()?;
        let rows: Vec<String> = (0..events.len()).map(|k| format!("(?1, ?2, ?3 + {k}, ?{})", k + 4)).collect();
        let mut p = vals![campaign, at, last - n + 1].to_vec();
        p.extend(events.iter().map(Value::from));
        c.execute(&format!("INSERT INTO campaign_events (campaign, at, seq, event) VALUES {}", rows.join(", ")), &p)?;
        Ok(())
    })
}
