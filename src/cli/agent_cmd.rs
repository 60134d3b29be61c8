//! `lab agent [--host NAME]` serves a lab host's devices with the campaigns submitted to
//! the lab (docs/agents.md); `lab agent drain HOST` asks a host's agent, from anywhere, to
//! finish its trials in progress and exit.

use super::context;
use super::exit::{self, CliError};
use super::listener::listen;
use super::reporter::Output;
use crate::runner::{self, AgentError};

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AgentArgs {
    #[command(subcommand)]
    pub action: Option<AgentAction>,
    /// The lab host (a `[[host]]` of the lab file) whose devices this agent serves.
    #[arg(long, value_name = "NAME", default_value = "local")]
    pub host: String,
    /// One line per phase change of every trial too.
    #[arg(long, short)]
    pub verbose: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum AgentAction {
    /// Ask HOST's agent to drain: its trials in progress finish, it takes nothing new,
    /// and exits 0 (as SIGTERM does where it runs).
    Drain {
        /// The lab host whose agent drains.
        host: String,
    },
}

pub async fn run(lab_arg: Option<&std::path::Path>, args: &AgentArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    if let Some(AgentAction::Drain { host }) = &args.action {
        context::check_host_arg(&lab, host)?;
        let store = context::existing_store(&lab)?;
        let agent = store.agents()?.into_iter().find(|a| &a.row.host == host);
        return match agent {
            Some(a) if a.shown_state != "gone" && a.shown_state != "stopped" => {
                store.set_agent_state(host, "draining")?;
                store.notify(crate::store::Channel::Work)?;
                Ok((
                    format!(
                        "the agent of {host} (pid {} on {}) drains: its trials in progress finish, then it exits\n",
                        a.row.pid, a.row.machine
                    ),
                    exit::OK,
                ))
            }
            _ => Err(CliError::new(
                exit::UNAVAILABLE,
                format!("no agent serves host {host}; fix: `lab status` lists the agents"),
            )),
        };
    }
    context::check_host_arg(&lab, &args.host)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let signals = tokio::spawn(async move {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(t) => t,
            Err(_) => return,
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        let _ = stop_tx.send(true);
        // A second signal: out at once (its attempts are recorded interrupted by the next agent).
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        std::process::exit(exit::INTERRUPTED as i32);
    });
    let (events, listener) = listen(&lab.store, args.verbose, Output::Human);
    let served = runner::serve_agent(lab, args.host.clone(), events, stop_rx).await;
    listener.finish().await;
    signals.abort();
    match served {
        Ok(()) => Ok((String::new(), exit::OK)),
        Err(e @ AgentError::AlreadyServed { .. }) => Err(CliError::new(exit::UNAVAILABLE, e)),
        Err(e @ (AgentError::UnknownHost { .. } | AgentError::NoDevices { .. })) => Err(CliError::bad_input(e)),
        Err(AgentError::OpenStore(e)) => Err(e.into()),
        Err(AgentError::Store(e)) => Err(e.into()),
    }
}
