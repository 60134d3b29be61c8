//! `lab cancel CAMPAIGN` (docs/agents.md): a queued campaign is removed; one the lab's
//! agents run stops at once (attempts in progress recorded interrupted) and stays
//! resumable (`lab submit --resume`).

use super::context;
use super::exit::{self, CliError};
use crate::store::{Cancelled, Channel};

#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    /// The campaign (its id from `lab submit` or `lab status`).
    pub campaign: String,
}

pub fn run(lab_arg: Option<&std::path::Path>, args: &CancelArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    let store = context::existing_store(&lab)?;
    let id = &args.campaign;
    let text = match store.cancel_campaign(id, &crate::runner::now_rfc3339())? {
        Cancelled::Removed => format!("campaign {id} was queued: removed\n"),
        Cancelled::Stopping => format!(
            "campaign {id}: its agents stop it now (attempts in progress are recorded interrupted); continue it \
with: lab submit --resume {id}\n"
        ),
        Cancelled::Ended(s) => format!("campaign {id} is already {}: nothing to cancel\n", s.as_str()),
        Cancelled::RunByProcess(pid) => {
            return Err(CliError::bad_input(format!(
                "campaign {id} is run by `lab run` (pid {pid}), not by the lab's agents; fix: Ctrl-C it in its \
terminal"
            )));
        }
    };
    store.notify(Channel::Work)?;
    store.notify_about(Channel::Events, id)?;
    Ok((text, exit::OK))
}
