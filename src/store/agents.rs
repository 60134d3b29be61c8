//! The lab's agents (`lab agent`, docs/agents.md): one row per lab host's agent, saying
//! what it is (version, the plan format it runs, its devices, its process) and what it
//! does (serving, draining). Whether it is alive is its lock: an `flock` next to a SQLite
//! store, a session advisory lock on PostgreSQL, which end with its process or its
//! connection, as a device's lease does. A row whose lock is free is an agent gone.

use serde::Serialize;

use super::backend::{Columns, DbError, FromRow, Held, LockName, Owner, read_all, vals};
use super::error::StoreError;
use super::process_id::{ProcessId, start_from_column};
use super::store::Store;

/// An agent as its row says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentRow {
    /// The lab host it serves (a `[[host]]` name).
    pub host: String,
    /// The machine it runs on (its hostname).
    pub machine: String,
    pub pid: u32,
    #[serde(skip)]
    pub start: Option<u64>,
    /// Its `lab` version.
    pub version: String,
    /// The newest plan format it runs ([`super::PLAN_FORMAT`] of its version).
    pub plan_format: u32,
    /// The devices it serves.
    pub devices: Vec<String>,
    /// RFC 3339 UTC: since when it serves.
    pub since: String,
    /// `serving` or `draining` (as it last said; `gone` is its lock's to say).
    pub state: String,
    /// Campaigns it refused and why, one line each (a plan it cannot run).
    pub refused: String,
}

impl AgentRow {
    const COLUMNS: &str = "host, machine, pid, pid_start, version, plan_format, devices, since, state, refused";
}

impl FromRow<'_> for AgentRow {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(AgentRow {
            host: c.get()?,
            machine: c.get()?,
            pid: c.get()?,
            start: start_from_column(c.get()?),
            version: c.get()?,
            plan_format: c.get()?,
            devices: serde_json::from_str(&c.get::<String>()?).unwrap_or_default(),
            since: c.get()?,
            state: c.get()?,
            refused: c.get()?,
        })
    }
}

/// An agent and whether it is alive: what `lab status` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agent {
    #[serde(flatten)]
    pub row: AgentRow,
    /// `serving`, `draining` or `gone` (its process or its database session ended).
    pub shown_state: &'static str,
}

/// A held agent lock: the host is this agent's while it lives.
#[derive(Debug)]
pub struct AgentLock {
    held: Box<dyn Held>,
}

impl AgentLock {
    /// Turns `true` if the lock is lost while the agent lives (PostgreSQL: its session
    /// ended); the agent then takes it again.
    pub fn lost(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.held.lost()
    }
}

impl Store {
    /// The lock of `host`'s agent, if no other agent holds it.
    pub fn take_agent_lock(&self, host: &str) -> Result<Option<AgentLock>, StoreError> {
        let name = LockName::Agent(host.to_string());
        let held = self
            .locks
            .lock(&name, false)
            .map_err(|e| StoreError::Wait { device: format!("the agent of host {host}"), source: Box::new(e) })?;
        Ok(held.map(|held| AgentLock { held }))
    }

    /// Writes this process's agent row for `row.host` (its lock held).
    pub fn register_agent(&self, row: &AgentRow) -> Result<(), StoreError> {
        let me = ProcessId::current();
        let devices = serde_json::to_string(&row.devices)?;
        let r = vals![
            &row.host,
            &row.machine,
            me.pid,
            me.start_column(),
            &row.version,
            row.plan_format,
            devices,
            &row.since,
            &row.state
        ];
        self.db.call(move |c| {
            c.execute(
                "INSERT INTO agents (host, machine, pid, pid_start, version, plan_format, devices, since, state, refused)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, '')
                 ON CONFLICT (host) DO UPDATE SET machine = ?2, pid = ?3, pid_start = ?4, version = ?5,
                    plan_format = ?6, devices = ?7, since = ?8, state = ?9, refused = ''",
                &r,
            )
        })?;
        Ok(())
    }

    /// Sets `host`'s agent's state (`draining` from `lab agent drain`, anywhere); false if
    /// the host has no agent row.
    pub fn set_agent_state(&self, host: &str, state: &str) -> Result<bool, StoreError> {
        let r = vals![host, state];
        Ok(self.db.call(move |c| c.execute("UPDATE agents SET state = ?2 WHERE host = ?1", &r))? > 0)
    }

    /// Records the campaigns `host`'s agent refuses, and why (one line each).
    pub fn set_agent_refused(&self, host: &str, refused: &str) -> Result<(), StoreError> {
        let r = vals![host, refused];
        self.db.call(move |c| c.execute("UPDATE agents SET refused = ?2 WHERE host = ?1", &r))?;
        Ok(())
    }

    /// `host`'s agent's row.
    pub fn agent_row(&self, host: &str) -> Result<Option<AgentRow>, StoreError> {
        let sql = format!("SELECT {} FROM agents WHERE host = ?1", AgentRow::COLUMNS);
        let h = vals![host];
        let row = self.db.call(move |c| c.query_opt(&sql, &h))?;
        Ok(row.as_ref().map(|r| r.read()).transpose()?)
    }

    /// Every agent the store knows, by host, with whether each is alive.
    pub fn agents(&self) -> Result<Vec<Agent>, StoreError> {
        let sql = format!("SELECT {} FROM agents ORDER BY host", AgentRow::COLUMNS);
        let rows = self.db.call(move |c| c.query(&sql, &[]))?;
        let rows: Vec<AgentRow> = read_all(&rows)?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let owner = Owner { pid: row.pid, start: row.start, lock: LockName::Agent(row.host.clone()) };
                let shown_state = match (self.locks.alive(&owner), row.state.as_str()) {
                    (false, _) => "gone",
                    (true, "draining") => "draining",
                    (true, _) => "serving",
                };
                Agent { row, shown_state }
            })
            .collect())
    }

    /// The hosts whose agents are alive and serving.
    pub fn serving_hosts(&self) -> Result<Vec<String>, StoreError> {
        Ok(self.agents()?.into_iter().filter(|a| a.shown_state == "serving").map(|a| a.row.host).collect())
    }
}
