//! `lab hosts check`: reachability, latency, login, host key and tools of every host
//! (`lab hosts forward` is in forward_cmd.rs).

use std::fmt::Write as _;

use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::context;
use super::exit::{self, CliError};
use super::forward_cmd::ForwardArgs;
use crate::transport::{HostCheck, check_all};

#[derive(Debug, clap::Args)]
pub struct HostsArgs {
    #[command(subcommand)]
    pub command: HostsCommand,
    /// Print the checks (or the forward's address) as JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum HostsCommand {
    /// Connect to every host: reachability, latency, host key, login, and the tools its devices need.
    Check,
    /// Listen on 127.0.0.1 and lead every connection to a TCP port or Unix socket on a host
    /// (e.g. usbmuxd's socket, an adb server), until Ctrl-C.
    Forward(ForwardArgs),
}

#[derive(Tabled)]
struct Row {
    host: String,
    address: String,
    reachable: &'static str,
    #[tabled(rename = "host key")]
    host_key: &'static str,
    login: &'static str,
    latency: String,
    tools: String,
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "NO" }
}

pub async fn run(lab_arg: Option<&std::path::Path>, args: &HostsArgs) -> Result<(String, u8), CliError> {
    match &args.command {
        HostsCommand::Check => check(lab_arg, args).await,
        HostsCommand::Forward(f) => super::forward_cmd::run(lab_arg, f, args.json).await,
    }
}

async fn check(lab_arg: Option<&std::path::Path>, args: &HostsArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    let checks = check_all(&lab).await;
    let code = if checks.iter().all(HostCheck::ok) { exit::OK } else { exit::UNAVAILABLE };
    if args.json {
        return Ok((serde_json::to_string_pretty(&checks).map_err(CliError::internal)?, code));
    }
    Ok((render(&checks), code))
}

pub fn render(checks: &[HostCheck]) -> String {
    let rows: Vec<Row> = checks
        .iter()
        .map(|c| Row {
            host: c.host.clone(),
            address: c.address.clone(),
            reachable: yes_no(c.reachable),
            host_key: if c.reachable { yes_no(c.host_key) } else { "-" },
            login: if c.host_key { yes_no(c.login) } else { "-" },
            latency: c.latency_ms.map(|ms| format!("{ms:.1} ms")).unwrap_or_else(|| "-".into()),
            tools: if c.tools.is_empty() {
                "-".into()
            } else {
                c.tools
                    .iter()
                    .map(|t| format!("{} {}", t.tool, if t.found { "ok" } else { "MISSING" }))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        })
        .collect();
    let mut s = Table::new(rows).with(Style::rounded()).to_string();
    s.push('\n');
    for c in checks.iter().filter(|c| c.problem.is_some()) {
        let _ = writeln!(s, "{}: {}", c.host, c.problem.as_deref().unwrap_or_default());
    }
    s
}
