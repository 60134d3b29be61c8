//! `lab run RUNBOOK` and `lab run --resume CAMPAIGN`.

use std::path::{Path, PathBuf};

use super::campaign_run::{MessageFormat, QueueArgs, RunOutcome, queueing, run_until_ctrl_c};
use super::context;
use super::exit::CliError;
use super::on_agents::{self, OnCtrlC};
use super::reporter::Output;
use crate::runner::{self, Start};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The runbook (matrix) to run, e.g. runbooks/quickstart.toml.
    pub runbook: Option<PathBuf>,
    /// Continue an interrupted campaign (id from `lab status`).
    #[arg(long, value_name = "CAMPAIGN", conflicts_with = "runbook")]
    pub resume: Option<String>,
    /// Print the final summary as JSON instead of tables.
    #[arg(long, conflicts_with = "message_format")]
    pub json: bool,
    /// Plain progress: one line per phase change too.
    #[arg(long, short)]
    pub verbose: bool,
    /// `json`: every runner event as one JSON object per line on stdout, for CI systems
    /// and dashboards (docs/report.md, "The event stream").
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "human")]
    pub message_format: MessageFormat,
    /// Run the campaign a manifest describes (`artifacts/<campaign>/manifest.json`,
    /// maybe copied off another lab): same runbook, seed and order, on this lab.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["runbook", "resume"])]
    pub from_manifest: Option<PathBuf>,
    /// With --from-manifest: go on when a build's files no longer have the manifest's
    /// hashes (the new campaign's manifest and report say which).
    #[arg(long, requires = "from_manifest")]
    pub allow_changed_builds: bool,
    #[command(flatten)]
    pub queue: QueueArgs,
}

pub const NO_RUNBOOK: &str = "no runbook given; fix: `lab run runbooks/quickstart.toml` (a first campaign in seconds) \
or `lab run runbooks/envoy-battery-audit.toml` (the Envoy Mobile battery audit), or `lab run --resume CAMPAIGN`";

pub async fn run(lab_arg: Option<&Path>, args: &RunArgs) -> Result<RunOutcome, CliError> {
    let lab = context::load_lab(lab_arg)?;
    let output = match (args.message_format, args.json) {
        (MessageFormat::Json, _) => Output::EventStream,
        (MessageFormat::Human, true) => Output::SummaryJson,
        (MessageFormat::Human, false) => Output::Human,
    };
    // Where the lab's agents serve the runbook's devices, they run it: submitted, then
    // followed here (Ctrl-C cancels it, as it stops a campaign run here).
    if let Some(path) = &args.runbook
        && on_agents::served(&lab, path)?
    {
        // Caught before the submit: a Ctrl-C from then on cancels what was submitted.
        let interrupt = on_agents::catch_ctrl_c()?;
        let s = crate::runner::submit(&lab, path, args.queue.priority)?;
        return on_agents::follow(lab, &s.id, (output, args.verbose), (OnCtrlC::Cancel, interrupt)).await;
    }
    if let Some(id) = &args.resume
        && let Some(store) = context::open_store_existing(&lab)?
        && store.submitted(id).ok().flatten().is_some()
    {
        // A submitted campaign goes on on the agents.
        let interrupt = on_agents::catch_ctrl_c()?;
        if store.resubmit(id, None)? == crate::store::CampaignStatus::Interrupted {
            store.notify(crate::store::Channel::Work)?;
        }
        return on_agents::follow(lab, id, (output, args.verbose), (OnCtrlC::Cancel, interrupt)).await;
    }
    let start = match (&args.runbook, &args.resume, &args.from_manifest) {
        (Some(path), _, _) => Start::Runbook { path: path.clone(), id: None, seed: None },
        (None, Some(id), _) => Start::Resume(id.clone()),
        (None, None, Some(file)) => {
            let mut manifest = runner::Manifest::read(file).map_err(|e| CliError::bad_input(e.to_string()))?;
            // Copied off another lab, its runbook's folder may not be here: its build files
            // are then looked for next to the manifest.
            let recorded = PathBuf::from(&manifest.runbook.path);
            if !recorded.parent().is_some_and(|p| p.as_os_str().is_empty() || p.is_dir()) {
                let name = recorded.file_name().map(PathBuf::from).unwrap_or_else(|| "runbook.toml".into());
                manifest.runbook.path = file.parent().unwrap_or(Path::new(".")).join(name).display().to_string();
            }
            Start::Manifest { manifest: Box::new(manifest), allow_changed_builds: args.allow_changed_builds }
        }
        (None, None, None) => return Err(CliError::bad_input(NO_RUNBOOK)),
    };
    run_until_ctrl_c(lab, start, queueing(args.queue), output, args.verbose).await
}
