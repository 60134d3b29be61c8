//! `lab hosts forward HOST TARGET`: a port forward that runs until Ctrl-C or SIGTERM.

use std::path::Path;

use serde::Serialize;
use tokio::signal::unix::{SignalKind, signal};

use super::context;
use super::exit::{self, CliError};
use super::reporter;
use crate::transport::{Forward, ForwardTarget, TransportError, for_host};

#[derive(Debug, clap::Args)]
pub struct ForwardArgs {
    /// A `[[host]]` name in lab.toml (`local`: this machine, in the default lab).
    pub host: String,
    /// Where connections go on the host: tcp:HOST:PORT (e.g. tcp:127.0.0.1:5037) or
    /// unix:/PATH (e.g. unix:/var/run/usbmuxd).
    pub target: String,
    /// The port to listen on, on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub local_port: u16,
}

/// The first line in `--json` mode.
#[derive(Debug, Serialize)]
struct Listening<'a> {
    host: &'a str,
    /// `127.0.0.1:PORT`.
    listen: String,
    port: u16,
    target: String,
}

pub async fn run(lab_arg: Option<&Path>, args: &ForwardArgs, json: bool) -> Result<(String, u8), CliError> {
    let target: ForwardTarget = args.target.parse().map_err(CliError::bad_input)?;
    let lab = context::load_lab(lab_arg)?;
    let Some(host) = lab.host(&args.host) else {
        let names: Vec<&str> = lab.hosts.iter().map(|h| h.name.as_str()).collect();
        return Err(CliError::bad_input(format!(
            "unknown host `{}` in {}: the hosts are {}; fix: use one of them, or add a [[host]] with that name",
            args.host,
            lab.source.display(),
            names.join(", ")
        )));
    };
    let fwd = for_host(host).forward(args.local_port, &target).await.map_err(cli_error)?;
    reporter::line(&listening_line(&fwd, json)?);
    hold(&fwd).await?;
    reporter::note(&format!("forward stopped: {} connections, {} failed", fwd.connections(), fwd.failed()));
    Ok((String::new(), exit::OK))
}

fn listening_line(fwd: &Forward, json: bool) -> Result<String, CliError> {
    let addr = fwd.local_addr();
    if json {
        let l = Listening {
            host: fwd.host(),
            listen: addr.to_string(),
            port: addr.port(),
            target: fwd.target().to_string(),
        };
        return serde_json::to_string(&l).map_err(CliError::internal);
    }
    Ok(format!("forwarding {addr} → {} {}; Ctrl-C to stop", fwd.host(), fwd.target()))
}

/// Waits for Ctrl-C or SIGTERM, telling on stderr why a connection failed as it happens.
/// Sleeps in between: no timer, no polling.
async fn hold(fwd: &Forward) -> Result<(), CliError> {
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| CliError::internal(format!("cannot watch SIGTERM: {e}")))?;
    let mut failures = fwd.failures();
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = term.recv() => return Ok(()),
            changed = failures.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                if let Some(why) = fwd.last_error() {
                    reporter::note(&format!("a connection failed: {why}"));
                }
            }
        }
    }
}

/// Bad `--local-port` is the user's to fix (2); a host that cannot be reached, trusted or
/// logged into is unavailable (3).
fn cli_error(e: TransportError) -> CliError {
    let code = match &e {
        TransportError::Listen { .. } => exit::BAD_INPUT,
        TransportError::Unreachable { .. }
        | TransportError::HostKey { .. }
        | TransportError::Auth { .. }
        | TransportError::Timeout { .. } => exit::UNAVAILABLE,
        _ => exit::INTERNAL,
    };
    CliError::new(code, e)
}
