//! `lab wait CAMPAIGN`: follow a campaign the lab's agents run with `lab run`'s output,
//! event stream and exit codes (docs/agents.md). Ctrl-C detaches; the campaign goes on.

use super::campaign_run::{MessageFormat, RunOutcome};
use super::context;
use super::exit::CliError;
use super::on_agents::{OnCtrlC, catch_ctrl_c, follow};
use super::reporter::Output;

#[derive(Debug, clap::Args)]
pub struct WaitArgs {
    /// The campaign (its id from `lab submit` or `lab status`).
    pub campaign: String,
    /// Plain progress: one line per phase change too.
    #[arg(long, short)]
    pub verbose: bool,
    /// `json`: every event as one JSON object per line, as `lab run --message-format json`.
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "human")]
    pub message_format: MessageFormat,
}

pub async fn run(lab_arg: Option<&std::path::Path>, args: &WaitArgs) -> Result<RunOutcome, CliError> {
    let interrupt = catch_ctrl_c()?;
    let lab = context::load_lab(lab_arg)?;
    // An unknown campaign is bad input, before anything is followed.
    context::existing_store(&lab)?.campaign_without_plan(&args.campaign)?;
    let output = match args.message_format {
        MessageFormat::Json => Output::EventStream,
        MessageFormat::Human => Output::Human,
    };
    follow(lab, &args.campaign, (output, args.verbose), (OnCtrlC::Detach, interrupt)).await
}
