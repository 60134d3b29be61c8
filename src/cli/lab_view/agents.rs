//! The lab's agents in the status view (docs/agents.md): each one's host, state
//! (serving, draining, stopped, gone), process, version and devices, and the campaigns it
//! refused with why.

use std::fmt::Write;

use serde::Serialize;
use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::super::exit::CliError;
use crate::store::Store;

#[derive(Debug, Serialize, Tabled)]
pub struct AgentLine {
    pub host: String,
    /// serving, draining, stopped (drained and exited) or gone (killed, or its database
    /// session lost).
    pub state: String,
    /// Machine and pid.
    pub process: String,
    pub version: String,
    pub devices: String,
    pub since: String,
    /// Campaigns it refused and why (a plan newer than it runs).
    pub refused: String,
    /// Its devices, one by one (`devices` is them as shown).
    #[serde(skip)]
    #[tabled(skip)]
    pub device_names: Vec<String>,
}

impl AgentLine {
    /// Alive: serving, or draining (finishing what it runs).
    pub fn alive(&self) -> bool {
        self.state == "serving" || self.state == "draining"
    }
}

pub fn collect(store: Option<&Store>) -> Result<Vec<AgentLine>, CliError> {
    let Some(store) = store else { return Ok(Vec::new()) };
    Ok(store
        .agents()?
        .into_iter()
        .map(|a| {
            // A row left by an agent that exited after draining says so; any other dead
            // one is gone.
            let state = match (a.shown_state, a.row.state.as_str()) {
                ("gone", "stopped") => "stopped",
                (s, _) => s,
            };
            AgentLine {
                host: a.row.host,
                state: state.into(),
                process: format!("{} ({})", a.row.machine, a.row.pid),
                version: a.row.version,
                devices: a.row.devices.join(", "),
                device_names: a.row.devices.clone(),
                since: a.row.since,
                refused: a.row.refused.replace('\n', "; "),
            }
        })
        .collect())
}

pub fn render(s: &mut String, lines: &[AgentLine]) {
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(s, "\nagents (`lab agent` on each lab host):\n{}", Table::new(lines).with(Style::rounded()));
}
