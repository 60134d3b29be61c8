//! A campaign on the lab's agents from the terminal (docs/agents.md): `lab wait`, and
//! `lab run` where agents serve the runbook's devices (it submits, then waits). Follows
//! the campaign's stored events with `lab run`'s reporter; when it ends, writes its report
//! files here from the store and exits as `lab run` would.

use tokio::sync::watch;

use super::campaign_run::RunOutcome;
use super::context;
use super::exit::{self, CliError};
use super::listener::listen;
use super::reporter::Output;
use crate::config::Lab;
use crate::report::write_campaign_files;
use crate::runner::{self, Followed};
use crate::store::{CampaignStatus, Store};

/// What Ctrl-C does while following.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnCtrlC {
    /// `lab wait`: stop following; the campaign goes on.
    Detach,
    /// `lab run`: cancel the campaign (as Ctrl-C stops a campaign `lab run` runs itself).
    Cancel,
}

/// Ctrl-C caught from now on: the caller takes it first thing, before it opens the lab or
/// its store (a PostgreSQL connection takes a while on a busy host), so that a Ctrl-C from
/// the first moment detaches (or cancels) rather than killing the process.
pub fn catch_ctrl_c() -> Result<tokio::signal::unix::Signal, CliError> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| CliError::internal(format!("cannot catch Ctrl-C: {e}")))
}

/// Follows campaign `id` until it ends (or Ctrl-C, caught by [`catch_ctrl_c`]), shown as
/// `output` asks.
pub async fn follow(
    lab: Lab,
    id: &str,
    (output, verbose): (Output, bool),
    (ctrl_c, mut interrupt): (OnCtrlC, tokio::signal::unix::Signal),
) -> Result<RunOutcome, CliError> {
    let store = context::existing_store(&lab)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let signal = tokio::spawn(async move {
        if interrupt.recv().await.is_some() {
            let _ = stop_tx.send(true);
        }
    });
    let (events, listener) = listen(&lab.store, verbose, output);
    let followed = runner::follow(store.clone(), id, events, stop_rx).await;
    let stream = listener.finish().await;
    signal.abort();
    let followed = followed?;
    let mut text = String::new();
    let mut files: Vec<String> = Vec::new();
    let code = match followed {
        Followed::Detached if ctrl_c == OnCtrlC::Detach => {
            text.push_str(&format!("\ndetached; campaign {id} goes on (follow it again: lab wait {id})\n"));
            exit::INTERRUPTED
        }
        Followed::Detached => {
            let s = store.clone();
            let i = id.to_string();
            let at = runner::now_rfc3339();
            tokio::task::spawn_blocking(move || s.cancel_campaign(&i, &at)).await.map_err(CliError::internal)??;
            store.notify(crate::store::Channel::Work)?;
            text.push_str(&format!(
                "\ncampaign {id} is cancelled; its agents stop it now. Continue it with: lab submit --resume {id}\n"
            ));
            exit::INTERRUPTED
        }
        Followed::Removed => {
            text.push_str(&format!("\ncampaign {id} was cancelled before it started\n"));
            exit::INTERRUPTED
        }
        Followed::Ended(CampaignStatus::Done) => {
            let counts = store.outcome_counts(id)?;
            let written = write_campaign_files(&store, id, &lab.artifacts_dir.join(id))?;
            files = written.paths.iter().map(|f| context::display_path(f)).collect();
            if output == Output::Human {
                text.push('\n');
                text.push_str(&written.tables);
                text.push_str("\nreport files:\n");
                for f in &written.paths {
                    text.push_str(&format!("  {}\n", crate::fs::display_path(f)));
                }
            }
            if counts.failed > 0 { exit::TRIALS_FAILED } else { exit::OK }
        }
        Followed::Ended(_) => {
            text.push_str(&format!(
                "\ncampaign {id} is interrupted (cancelled); continue it with: lab submit --resume {id}\n"
            ));
            exit::INTERRUPTED
        }
    };
    let stream = stream.map(|mut s| {
        // The stream's last line, as `lab run`'s: where the report is, and how it ends.
        let last = serde_json::json!({ "event": "report_written", "campaign": id, "files": files, "exit_code": code });
        if let serde_json::Value::Object(fields) = last {
            s.write(fields);
        }
        s
    });
    Ok(RunOutcome { output: if stream.is_some() { String::new() } else { text }, code, campaign: id.into(), stream })
}

/// Whether `lab run` of `runbook` goes to the agents: every host of its devices has a live
/// agent. `None` where none has (the campaign runs in this process, as always); a runbook
/// whose devices are split between served hosts and others is bad input.
pub fn served(lab: &Lab, runbook: &std::path::Path) -> Result<bool, CliError> {
    let Some(store) = Store::open_existing_at(&lab.store)? else { return Ok(false) };
    let serving = store.serving_hosts()?;
    if serving.is_empty() {
        return Ok(false);
    }
    let hosts = runner::planned_hosts(lab, runbook)?;
    let (on, off): (Vec<&String>, Vec<&String>) = hosts.iter().partition(|h| serving.contains(h));
    match (on.is_empty(), off.is_empty()) {
        (true, _) => Ok(false),
        (false, true) => Ok(true),
        (false, false) => Err(CliError::bad_input(format!(
            "{}: its devices are on hosts with agents ({}) and without ({}); fix: start `lab agent --host HOST` on \
the others, or split the runbook",
            runbook.display(),
            join(&on),
            join(&off)
        ))),
    }
}

fn join(h: &[&String]) -> String {
    h.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
}
