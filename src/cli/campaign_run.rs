//! Running a campaign from the terminal, for `lab run` and `lab rerun`: the runner's
//! launch with its events shown, Ctrl-C as the stop, the ending as the exit code.

use tokio::sync::watch;

use super::context;
use super::exit::{self, CliError};
use super::listener::listen;
use super::reporter::Output;
use crate::config::Lab;
use crate::runner::{self, Ending, Queueing, Start, StartWhen};

/// How a campaign takes its turn on devices other campaigns hold (docs/shared-lab.md).
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct QueueArgs {
    /// Place in the devices' queues: higher goes first; equal priorities in the order
    /// they came.
    #[arg(long, value_name = "N", default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i32,
    /// Exit (code 3) at once, naming the holder, when a device is held or queued for,
    /// instead of waiting for it.
    #[arg(long)]
    pub no_wait: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum MessageFormat {
    Human,
    Json,
}

/// What the command printed and its exit code.
pub struct RunOutcome {
    pub output: String,
    pub code: u8,
    /// The campaign it ran.
    pub campaign: String,
    /// The event stream, when it was asked for: a caller may add lines after the run's.
    pub stream: Option<super::event_lines::EventLines>,
}

/// How a campaign takes its turn on its devices (docs/shared-lab.md).
pub(super) fn queueing(q: QueueArgs) -> Queueing {
    let start = if q.no_wait { StartWhen::AllNow } else { StartWhen::AnyFree };
    Queueing { priority: q.priority, start }
}

/// Runs `start` until done or Ctrl-C (the first lets the trials in flight wind down, a
/// second exits at once).
pub(super) async fn run_until_ctrl_c(
    lab: Lab,
    start: Start,
    queueing: Queueing,
    output: Output,
    verbose: bool,
) -> Result<RunOutcome, CliError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop_tx.send(true);
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(exit::INTERRUPTED as i32);
            }
        }
    });
    let result = run_campaign(lab, start, queueing, output, verbose, stop_rx).await;
    ctrl_c.abort();
    result
}

/// `lab run`'s whole path, for `lab run` and `lab rerun`: the campaign started by the
/// runner until done or until `stop` is set (the way a first Ctrl-C stops it), its events
/// shown as `output` asks, its ending as the exit code.
pub(super) async fn run_campaign(
    lab: Lab,
    start: Start,
    queueing: Queueing,
    output: Output,
    verbose: bool,
    stop: watch::Receiver<bool>,
) -> Result<RunOutcome, CliError> {
    let (events, listener) = listen(&lab.store, verbose, output);
    let result = runner::launch(lab, start, queueing, events, stop).await;
    let stream = listener.finish().await;
    let launched = result?;
    let id = launched.id.clone();
    let code = exit_code(launched.ending);
    let mut text = String::new();
    let stream = if let Some(mut stream) = stream {
        // The stream's last line: where the report is, and how the run ends.
        let files: Vec<String> = launched.files.iter().map(|f| context::display_path(f)).collect();
        let last = serde_json::json!({ "event": "report_written", "campaign": id, "files": files, "exit_code": code });
        if let serde_json::Value::Object(fields) = last {
            stream.write(fields);
        }
        Some(stream)
    } else if output == Output::SummaryJson {
        let files: Vec<String> = launched.files.iter().map(|f| context::display_path(f)).collect();
        let json = serde_json::json!({ "campaign": launched.summary, "files": files });
        text.push_str(&serde_json::to_string_pretty(&json).map_err(CliError::internal)?);
        text.push('\n');
        None
    } else {
        text = launched.text();
        None
    };
    Ok(RunOutcome { output: text, code, campaign: id, stream })
}

/// The exit code of a campaign that ran (README: exit codes).
pub(super) fn exit_code(ending: Ending) -> u8 {
    match ending {
        Ending::Complete => exit::OK,
        Ending::TrialsFailed => exit::TRIALS_FAILED,
        Ending::Pending => exit::UNAVAILABLE,
        Ending::Interrupted => exit::INTERRUPTED,
    }
}
