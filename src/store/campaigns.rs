//! A campaign's operations: its row, its planned trials and how they stand, moves, its
//! report stamp.

use super::ProcessId;
use super::backend::{Columns, Conn, DbError, Row, Value, read_all, vals};
use super::error::StoreError;
use super::records::*;
use super::store::Store;

fn json_text(v: &serde_json::Value) -> String {
    v.to_string()
}

/// A plan's head (`campaigns.plan_head`, migration 11): the plan's JSON object without
/// its `trials`; `None` if the text is not a JSON object. The trials are skipped as they
/// are read, never built (SQLite's `json_remove` builds a tree of the whole text: a plan of
/// 144 000 trials took 130 MB more at the start of a run).
pub(crate) fn plan_head(plan_json: &str) -> Option<String> {
    struct Head(serde_json::Map<String, serde_json::Value>);
    impl<'de> serde::Deserialize<'de> for Head {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Head;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a plan as a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Head, A::Error> {
                    let mut head = serde_json::Map::new();
                    while let Some(key) = map.next_key::<String>()? {
                        if key == "trials" {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        } else {
                            head.insert(key, map.next_value()?);
                        }
                    }
                    Ok(Head(head))
                }
            }
            d.deserialize_map(Visit)
        }
    }
    let head: Head = serde_json::from_str(plan_json).ok()?;
    serde_json::to_string(&head.0).ok()
}

/// Trials per `INSERT` (11 parameters each: within SQLite's and PostgreSQL's limits). A
/// statement a row cost `lab submit` a round trip a trial on PostgreSQL.
const TRIALS_PER_INSERT: usize = 500;

fn insert_trials(c: &mut dyn Conn, id: &str, trials: &[PlannedTrialRow]) -> Result<(), DbError> {
    for chunk in trials.chunks(TRIALS_PER_INSERT) {
        let rows: Vec<String> = (0..chunk.len())
            .map(|r| format!("({})", (1..=11).map(|k| format!("?{}", r * 11 + k)).collect::<Vec<_>>().join(", ")))
            .collect();
        let params: Vec<Value> = chunk
            .iter()
            .flat_map(|t| {
                vals![
                    id,
                    t.idx,
                    &t.key,
                    &t.device,
                    &t.device_model,
                    &t.variant,
                    &t.build,
                    &t.config,
                    t.repeat,
                    t.block,
                    t.device_order
                ]
            })
            .collect();
        c.execute(
            &format!(
                "INSERT INTO trials (campaign, idx, key, device, device_model, variant, build, config, repeat, block,
                    device_order) VALUES {}",
                rows.join(", ")
            ),
            &params,
        )?;
    }
    Ok(())
}

/// A campaign's retry limit (`None`: no such campaign).
fn retry_limit(c: &mut dyn Conn, id: &str) -> Result<Option<u32>, DbError> {
    c.query_opt("SELECT max_attempts FROM campaigns WHERE id = ?1", &vals![id])?.as_ref().map(Row::read).transpose()
}

/// Each trial of a campaign with its attempts and valid ones (`SUM` cast: PostgreSQL
/// would widen it to `numeric`), grouped by the trials' key.
const TRIAL_COUNTS: &str =
    "COUNT(a.attempt), CAST(COALESCE(SUM(CASE WHEN a.status = 'valid' THEN 1 ELSE 0 END), 0) AS BIGINT)
     FROM trials t LEFT JOIN attempts a ON a.campaign = t.campaign AND a.trial_idx = t.idx
     WHERE t.campaign = ?1 GROUP BY t.campaign, t.idx";

/// A trial's outcome from its attempts and how many of them were valid.
pub(super) fn outcome(attempts: u32, valid: u32, max_attempts: u32) -> TrialOutcome {
    if valid > 0 {
        TrialOutcome::Valid
    } else if attempts >= max_attempts {
        TrialOutcome::Failed
    } else {
        TrialOutcome::Pending
    }
}

impl Store {
    /// Inserts a campaign and its planned trials in one transaction.
    pub fn create_campaign(&self, c: &NewCampaign, max_attempts: u32, pid: u32) -> Result<(), StoreError> {
        self.insert_campaign(c, max_attempts, Some(pid), None)
    }

    /// Inserts a campaign and its planned trials in one transaction: run by process `pid`,
    /// or (`pid` `None`) submitted, `queued` for the lab's agents with `submitted`'s priority.
    pub(super) fn insert_campaign(
        &self,
        c: &NewCampaign,
        max_attempts: u32,
        pid: Option<u32>,
        submitted: Option<i32>,
    ) -> Result<(), StoreError> {
        let status = if pid.is_some() { "running" } else { "queued" };
        let start = pid.and_then(|p| ProcessId::of(p).start_column());
        let row = vals![
            &c.id,
            &c.runbook_name,
            &c.runbook_path,
            &c.runbook_text,
            &c.runbook_sha256,
            &c.lab_text,
            &c.lab_sha256,
            json_text(&c.content_hashes),
            &c.tool_version,
            c.seed as i64,
            &c.created_at,
            pid,
            &c.plan_json,
            max_attempts,
            plan_head(&c.plan_json),
            start,
            status,
            submitted.is_some(),
            submitted.unwrap_or(0),
            super::submitted::PLAN_FORMAT
        ];
        let (id, trials) = (c.id.clone(), c.planned_trials.clone());
        self.db.call(move |conn| {
            conn.transaction(|conn| {
                conn.execute(
                    "INSERT INTO campaigns (id, runbook_name, runbook_path, runbook_text, runbook_sha256, lab_text,
                        lab_sha256, content_hashes, tool_version, seed, created_at, status, runner_pid, plan_json,
                        max_attempts, plan_head, runner_start, submitted, priority, plan_format)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?17, ?12, ?13, ?14, ?15, ?16, ?18, ?19, ?20)",
                    &row,
                )?;
                insert_trials(conn, &id, &trials)
            })
        })?;
        Ok(())
    }

    /// Adds planned trials to a campaign and stores its new plan, in one transaction
    /// (adaptive repeats): a resumed run sees both or neither.
    pub fn add_trials(&self, id: &str, trials: &[PlannedTrialRow], plan_json: &str) -> Result<(), StoreError> {
        let row = vals![id, plan_json, plan_head(plan_json)];
        let (campaign, trials) = (id.to_string(), trials.to_vec());
        let found = self.db.call(move |c| {
            c.transaction(|c| {
                if c.execute("UPDATE campaigns SET plan_json = ?2, plan_head = ?3 WHERE id = ?1", &row)? == 0 {
                    return Ok(false);
                }
                insert_trials(c, &campaign, &trials)?;
                Ok(true)
            })
        })?;
        if !found {
            return Err(StoreError::NoCampaign(id.into()));
        }
        Ok(())
    }

    /// Campaigns: `SELECT {CampaignRecord::COLUMNS}[, plan_json] FROM campaigns {tail}`;
    /// without `plan` the records' `plan_json` is left `Null` (unparsed).
    fn campaign_rows(&self, plan: bool, tail: &str, params: Vec<Value>) -> Result<Vec<CampaignRecord>, StoreError> {
        let sql = format!(
            "SELECT {}{} FROM campaigns {tail}",
            CampaignRecord::COLUMNS,
            if plan { ", plan_json" } else { "" }
        );
        let rows = self.db.call(move |c| c.query(&sql, &params))?;
        let campaign = |r: &Row| {
            let mut c = Columns::new(r);
            let mut campaign: CampaignRecord = c.read()?;
            if plan {
                campaign.plan_json = serde_json::from_str(&c.get::<String>()?).unwrap_or(serde_json::Value::Null);
            }
            Ok(campaign)
        };
        Ok(rows.iter().map(campaign).collect::<Result<_, DbError>>()?)
    }

    /// A campaign with its `plan_json` left `Null` and not read.
    pub fn campaign_without_plan(&self, id: &str) -> Result<CampaignRecord, StoreError> {
        self.campaign_rows(false, "WHERE id = ?1", vals![id].to_vec())?
            .pop()
            .ok_or_else(|| StoreError::NoCampaign(id.to_string()))
    }

    /// A campaign's status alone: what `lab wait` reads at each wake-up (the whole row
    /// carries the runbook's and the lab file's text). Read as `campaign_without_plan`
    /// reads it (an unknown status is `Interrupted`).
    pub fn campaign_status(&self, id: &str) -> Result<CampaignStatus, StoreError> {
        let params = vals![id];
        let row = self.db.call(move |c| c.query_opt("SELECT status FROM campaigns WHERE id = ?1", &params))?;
        let status: String = row.ok_or_else(|| StoreError::NoCampaign(id.into()))?.read()?;
        Ok(CampaignStatus::parse(&status).unwrap_or(CampaignStatus::Interrupted))
    }

    /// A campaign with its `plan_json` left `Null`, and the text of its plan's head (the
    /// plan without its trials, for `Plan::head_from_json`; the whole plan's text for a
    /// campaign whose head is not stored): a plan of 144 000 trials is 29 MB of text, and
    /// a report needs only its head.
    pub fn campaign_head(&self, id: &str) -> Result<(CampaignRecord, String), StoreError> {
        let sql =
            format!("SELECT {}, COALESCE(plan_head, plan_json) FROM campaigns WHERE id = ?1", CampaignRecord::COLUMNS);
        let params = vals![id];
        let row = self.db.call(move |c| c.query_opt(&sql, &params))?;
        Ok(row.ok_or_else(|| StoreError::NoCampaign(id.into()))?.read()?)
    }

    pub fn campaign(&self, id: &str) -> Result<CampaignRecord, StoreError> {
        self.campaign_rows(true, "WHERE id = ?1", vals![id].to_vec())?
            .pop()
            .ok_or_else(|| StoreError::NoCampaign(id.to_string()))
    }

    /// The newest campaign's id (as `campaigns()` orders them), without reading any plan.
    pub fn latest_campaign_id(&self) -> Result<Option<String>, StoreError> {
        let row =
            self.db.call(|c| c.query_opt("SELECT id FROM campaigns ORDER BY created_at DESC, id DESC LIMIT 1", &[]))?;
        Ok(row.as_ref().map(Row::read).transpose()?)
    }

    /// All campaigns, newest first.
    pub fn campaigns(&self) -> Result<Vec<CampaignRecord>, StoreError> {
        self.campaign_rows(true, "ORDER BY created_at DESC, id DESC", Vec::new())
    }

    /// A text that changes whenever what a campaign's report shows can: its row's status,
    /// end, note and footprint, its trials (count, queue order, every moved trial) and its attempts
    /// (count and newest row; attempts, their measurements and attestations are only ever
    /// inserted, together). Equal stamps: the report files written with the first are
    /// still those the store gives.
    pub fn report_stamp(&self, id: &str) -> Result<String, StoreError> {
        let id = id.to_string();
        self.db.call(move |c| Ok(report_stamp_on(c, &id)))?
    }

    /// All campaigns, newest first, each with its `plan_json` left `Null` (unparsed): what
    /// lists of campaigns need, at no cost per planned trial.
    pub fn campaign_list(&self) -> Result<Vec<CampaignRecord>, StoreError> {
        self.campaign_rows(false, "ORDER BY created_at DESC, id DESC", Vec::new())
    }

    /// A campaign id not yet taken: `<prefix>-<UTC yyyymmdd-hhmmss>`, with `-2`, `-3`, …
    /// appended while that is taken.
    pub fn free_campaign_id(&self, prefix: &str) -> Result<String, StoreError> {
        let base = format!("{prefix}-{}", chrono::Utc::now().format("%Y%m%d-%H%M%S"));
        let rows = self.db.call(|c| c.query("SELECT id FROM campaigns", &[]))?;
        let taken: Vec<String> = read_all(&rows)?;
        let mut id = base.clone();
        let mut n = 2;
        while taken.contains(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        Ok(id)
    }

    /// Marks a campaign as being worked on by process `pid` (a new run or a resume).
    pub fn set_running(&self, id: &str, pid: u32) -> Result<(), StoreError> {
        let row = vals![id, pid, ProcessId::of(pid).start_column()];
        let n = self.db.call(move |c| {
            c.execute(
                "UPDATE campaigns SET status = 'running', runner_pid = ?2, runner_start = ?3, finished_at = NULL,
                    note = NULL
                 WHERE id = ?1",
                &row,
            )
        })?;
        if n == 0 {
            return Err(StoreError::NoCampaign(id.into()));
        }
        Ok(())
    }

    pub fn finish_campaign(
        &self,
        id: &str,
        status: CampaignStatus,
        finished_at: &str,
        note: Option<&str>,
        footprint: Option<&serde_json::Value>,
    ) -> Result<(), StoreError> {
        let row = vals![id, status.as_str(), finished_at, note, footprint.map(json_text)];
        self.db.call(move |c| {
            c.execute(
                "UPDATE campaigns SET status = ?2, finished_at = ?3, note = ?4, runner_pid = NULL, runner_start = NULL,
                    footprint_json = COALESCE(?5, footprint_json) WHERE id = ?1",
                &row,
            )
        })?;
        Ok(())
    }

    /// A campaign's retry limit and `SELECT {columns}, {TRIAL_COUNTS} ORDER BY {order}`, read
    /// in one transaction (one snapshot).
    fn trial_counts(&self, id: &str, columns: &str, order: &str) -> Result<(u32, Vec<Row>), StoreError> {
        let sql =
            format!("SELECT {columns}{}{TRIAL_COUNTS} ORDER BY {order}", if columns.is_empty() { "" } else { ", " });
        let id_ = id.to_string();
        let (limit, rows) =
            self.db.call(move |c| c.read_transaction(|c| Ok((retry_limit(c, &id_)?, c.query(&sql, &vals![&id_])?))))?;
        Ok((limit.ok_or_else(|| StoreError::NoCampaign(id.into()))?, rows))
    }

    /// The devices campaign `id`'s trials are planned on, by name.
    pub fn campaign_devices(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let id = vals![id];
        let rows = self
            .db
            .call(move |c| c.query("SELECT DISTINCT device FROM trials WHERE campaign = ?1 ORDER BY device", &id))?;
        Ok(rows.iter().map(|r| r.get::<String>(0)).collect::<Result<_, _>>()?)
    }

    /// Planned trials with their outcome so far, in plan order.
    pub fn trials(&self, id: &str) -> Result<Vec<TrialRecord>, StoreError> {
        let (max_attempts, rows) = self.trial_counts(id, PlannedTrialRow::COLUMNS, "t.idx")?;
        let trial = |r: &Row| -> Result<TrialRecord, DbError> {
            let (row, (attempts, valid)): (PlannedTrialRow, (u32, u32)) = r.read()?;
            Ok(TrialRecord { row, attempts, outcome: outcome(attempts, valid, max_attempts) })
        };
        Ok(rows.iter().map(trial).collect::<Result<_, _>>()?)
    }

    /// What is left to run, per device (by name), with each device's trials in queue
    /// order: only indices and attempt counts, so a round holds no copy of the plan's rows.
    pub fn pending_queue(&self, id: &str) -> Result<Vec<DeviceQueue>, StoreError> {
        let (max_attempts, rows) = self.trial_counts(id, "t.device, t.idx", "t.device, t.device_order")?;
        let mut out: Vec<DeviceQueue> = Vec::new();
        for r in &rows {
            let (device, idx, (attempts, valid)): (String, u32, (u32, u32)) = r.read()?;
            if out.last().is_none_or(|q| q.device != device) {
                out.push(DeviceQueue { device, planned: 0, done: 0, pending: Vec::new() });
            }
            let q = out.last_mut().expect("pushed above");
            q.planned += 1;
            if outcome(attempts, valid, max_attempts) == TrialOutcome::Pending {
                q.pending.push((idx, attempts));
            } else {
                q.done += 1;
            }
        }
        Ok(out)
    }

    /// How a campaign's trials stand, in one aggregate query.
    pub fn outcome_counts(&self, id: &str) -> Result<OutcomeCounts, StoreError> {
        let (max_attempts, rows) = self.trial_counts(id, "", "t.idx")?;
        let mut c = OutcomeCounts::default();
        for r in &rows {
            let (attempts, valid): (u32, u32) = r.read()?;
            c.attempts += attempts;
            match outcome(attempts, valid, max_attempts) {
                TrialOutcome::Valid => c.valid += 1,
                TrialOutcome::Failed => c.failed += 1,
                TrialOutcome::Pending => c.pending += 1,
            }
        }
        Ok(c)
    }

    /// Gives pending trials to other devices, in one transaction; the first device each
    /// was planned on is kept in `moved_from`. A trial that already has a valid attempt
    /// is left where it is.
    pub fn move_trials(&self, id: &str, moves: &[TrialMove]) -> Result<usize, StoreError> {
        let rows: Vec<_> = moves.iter().map(|m| vals![id, m.trial_idx, &m.to_device, m.device_order]).collect();
        let moved = self.db.call(move |c| {
            c.transaction(|c| {
                let mut moved = 0;
                for row in &rows {
                    moved += c.execute(
                        "UPDATE trials SET moved_from = COALESCE(moved_from, device), device = ?3, device_order = ?4
                         WHERE campaign = ?1 AND idx = ?2 AND NOT EXISTS (
                             SELECT 1 FROM attempts a WHERE a.campaign = ?1 AND a.trial_idx = ?2 AND a.status = 'valid')",
                        row,
                    )?;
                }
                Ok(moved)
            })
        })?;
        Ok(moved as usize)
    }

    /// Trial index → the device it was first planned on, for trials that moved.
    pub fn moved_trials(&self, id: &str) -> Result<Vec<(u32, String)>, StoreError> {
        let id = vals![id];
        let rows = self.db.call(move |c| {
            c.query(
                "SELECT idx, moved_from FROM trials WHERE campaign = ?1 AND moved_from IS NOT NULL ORDER BY idx",
                &id,
            )
        })?;
        Ok(read_all(&rows)?)
    }
}

/// [`Store::report_stamp`] on `c` (inside a read transaction: the stamp of what it reads).
/// Attempts are only ever inserted: their count and newest row change with each.
pub(super) fn report_stamp_on(c: &mut dyn Conn, id: &str) -> Result<String, StoreError> {
    let head = stamp_head(c, id)?;
    // SQLite's newest attempt is its highest rowid; PostgreSQL, whose rows have no row id,
    // counts them in `attempt_report` (one row each, written with it; scanning the wide
    // `attempts` was a tenth of a report's time there) with the newest measurement id.
    let (moved, newest, attempts) = match c.dialect() {
        super::Dialect::Sqlite => {
            ("group_concat(idx || ':' || device || ':' || device_order, ',')", "rowid", "attempts")
        }
        super::Dialect::Postgres => (
            "string_agg(idx || ':' || device || ':' || device_order, ',' ORDER BY idx)",
            "measurements_to",
            "attempt_report",
        ),
    };
    let sql = format!(
        "SELECT (SELECT count(*) FROM trials WHERE campaign = ?1),
                -- Trials are only inserted with their campaign, and a move is the one
                -- update of a trial after that: the moved ones in full (index trials_moved).
                (SELECT COALESCE({moved}, '') FROM trials WHERE campaign = ?1 AND moved_from IS NOT NULL),
                (SELECT count(*) FROM {attempts} WHERE campaign = ?1),
                (SELECT max({newest}) FROM {attempts} WHERE campaign = ?1)"
    );
    let row = c.query_opt(&sql, &vals![id])?.ok_or_else(|| StoreError::NoCampaign(id.into()))?;
    let (trials, moved, (attempts, newest)): (i64, String, (i64, Option<i64>)) = row.read()?;
    Ok(stamp_text(&head, trials as u64, &moved, attempts as u64, newest))
}

/// The campaign's own part of its report stamp (its status, end, note, footprint and
/// runbook digest).
pub(super) fn stamp_head(c: &mut dyn Conn, id: &str) -> Result<String, StoreError> {
    c.query_opt(
        "SELECT status || '|' || COALESCE(finished_at, '') || '|' || COALESCE(note, '') || '|'
                || COALESCE(footprint_json, '') || '|' || runbook_sha256
         FROM campaigns WHERE id = ?1",
        &vals![id],
    )?
    .ok_or_else(|| StoreError::NoCampaign(id.into()))?
    .read()
    .map_err(Into::into)
}

/// A report stamp from its parts: the campaign's head, its trials' count, the moved ones
/// (`idx:device:order`, by idx, comma-separated), its attempts' count and newest.
pub(super) fn stamp_text(head: &str, trials: u64, moved: &str, attempts: u64, newest: Option<i64>) -> String {
    let newest = newest.map(|n| n.to_string()).unwrap_or_default();
    format!("{head}|{trials}|{moved}|{attempts}/{newest}")
}
