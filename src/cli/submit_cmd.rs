//! `lab submit RUNBOOK`: validate, plan and store a campaign for the lab's agents, print
//! its id and return (docs/agents.md); `--resume ID` queues an interrupted one again.

use std::path::PathBuf;

use super::context;
use super::exit::{self, CliError};
use crate::store::CampaignStatus;

#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// The runbook (matrix) to run on the lab's agents.
    #[arg(required_unless_present = "resume")]
    pub runbook: Option<PathBuf>,
    /// Queue an interrupted (or cancelled) campaign again: the agents run what is left.
    #[arg(long, value_name = "CAMPAIGN", conflicts_with = "runbook")]
    pub resume: Option<String>,
    /// Place among the submitted campaigns: higher goes first; equal in the order they came.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub priority: Option<i32>,
    /// Print what was submitted as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(lab_arg: Option<&std::path::Path>, args: &SubmitArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    if let Some(id) = &args.resume {
        let store = context::existing_store(&lab)?;
        return match store.resubmit(id, args.priority)? {
            CampaignStatus::Interrupted => {
                store.notify(crate::store::Channel::Work)?;
                Ok((format!("campaign {id} is queued again; follow it: lab wait {id}\n"), exit::OK))
            }
            s => Err(CliError::bad_input(format!(
                "campaign {id} is {}, not interrupted; fix: `lab wait {id}` follows it",
                s.as_str()
            ))),
        };
    }
    let runbook = args.runbook.as_ref().ok_or_else(|| CliError::bad_input("no runbook given"))?;
    let s = crate::runner::submit(&lab, runbook, args.priority.unwrap_or(0))?;
    if args.json {
        return Ok((serde_json::to_string_pretty(&s).map_err(CliError::internal)? + "\n", exit::OK));
    }
    let mut text = format!(
        "submitted campaign {} ({}: {} trials, priority {}); follow it: lab wait {}\n",
        s.id, s.runbook, s.trials, s.priority, s.id
    );
    if !s.hosts_without_agent.is_empty() {
        text.push_str(&format!(
            "note: no agent serves {} now; its trials wait for `lab agent --host HOST` there\n",
            s.hosts_without_agent.join(", ")
        ));
    }
    Ok((text, exit::OK))
}
