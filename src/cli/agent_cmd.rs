//! `lab agent [--host NAME]` serves a lab host's devices with the campaigns submitted to
//! the lab (docs/agents.md); `lab agent drain HOST` asks a host's agent, from anywhere, to
//! finish its trials in progress and exit.

use super::context;
use super::exit::{self, CliError};
use super::listener::listen;
use super::reporter::Output;
use crate::runner::{self, AgentError};
use crate::schedule::AgentUnit;

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
    /// Print a systemd service that runs HOST's agent at boot and whenever it ends.
    ///
    /// The unit names this binary and lab file by absolute path and has `Restart=always`.
    /// Save it as ~/.config/systemd/user/ (or /etc/systemd/system/) lab-agent-HOST.service,
    /// then `systemctl --user daemon-reload && systemctl --user enable --now
    /// lab-agent-HOST`. Upgrades are drain, replace, start: `systemctl stop` drains
    /// (SIGTERM: the trials in progress finish, for up to --stop-timeout), replace the
    /// binary, `systemctl start`. Or replace the binary first and `lab agent drain HOST`
    /// from anywhere: systemd starts the new one once the old one exits (docs/agents.md).
    Install {
        /// Print a systemd unit (the only kind so far).
        #[arg(long, required = true)]
        systemd: bool,
        /// The lab host whose agent the unit runs.
        #[arg(long, value_name = "NAME", default_value = "local")]
        host: String,
        /// How long a stop waits for the trials in progress to finish before the agent is
        /// killed (their attempts then recorded interrupted): longer than the lab's longest
        /// trial with its setup, e.g. `2h`, `30m`.
        #[arg(long, value_name = "DURATION", default_value = "2h", value_parser = parse_stop_timeout)]
        stop_timeout: std::time::Duration,
    },
}

/// `--stop-timeout`'s value; clap prints the error's message after the flag.
fn parse_stop_timeout(s: &str) -> Result<std::time::Duration, crate::config::ValueError> {
    crate::config::parse_duration(s)
}

/// The unit of `lab agent install --systemd`.
fn install(lab: &crate::config::Lab, host: &str, stop_timeout: std::time::Duration) -> Result<String, CliError> {
    context::check_host_arg(lab, host)?;
    if lab.source == std::path::Path::new("<embedded>") {
        return Err(CliError::bad_input(
            "an agent serves a lab file's devices, the built-in lab has none to share; fix: pass --lab FILE",
        ));
    }
    let unit = AgentUnit { paths: context::unit_paths(lab)?, host: host.to_string(), stop_timeout };
    Ok(format!(
        "# Save the file below into ~/.config/systemd/user/ (or /etc/systemd/system/), then\n\
         # `systemctl --user daemon-reload && systemctl --user enable --now lab-agent-{host}`.\n\
         # Upgrade: `systemctl --user stop lab-agent-{host}` (drains), replace the binary, `start`.\n\
         \n# ==> {} <==\n{}",
        unit.file_name(),
        unit.systemd_service()
    ))
}

pub async fn run(lab_arg: Option<&std::path::Path>, args: &AgentArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    if let Some(AgentAction::Install { systemd: _, host, stop_timeout }) = &args.action {
        return install(&lab, host, *stop_timeout).map(|s| (s, exit::OK));
    }
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
