//! `lab discover [--host H …] [--json | --toml]`: what is attached to each host, whether
//! lab.toml has it, what keeps it from use, and `[[device]]` blocks for what is new.

use std::fmt::Write as _;
use std::path::Path;

use super::context;
use super::exit::{self, CliError};
use super::findings::{ReachArgs, render};
use crate::config::{Host, Lab, phones_cannot_reach};
use crate::discover::{self, DiscoverOptions, HostFindings};

#[derive(Debug, clap::Args)]
pub struct DiscoverArgs {
    /// Only this `[[host]]` of lab.toml (repeat for several). Default: every host.
    #[arg(long = "host", value_name = "HOST")]
    pub hosts: Vec<String>,
    /// Print what was found as JSON.
    #[arg(long, conflicts_with = "toml")]
    pub json: bool,
    /// Print `[[device]]` blocks, ready to paste into lab.toml, for the phones it lacks.
    #[arg(long)]
    pub toml: bool,
    #[command(flatten)]
    pub reach: ReachArgs,
}

pub async fn run(lab_arg: Option<&Path>, args: &DiscoverArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    let opts = args.reach.options()?;
    let hosts = chosen_hosts(&lab, &args.hosts)?;
    let found = discover::discover(&lab, &hosts, &opts).await;
    let code = if found.iter().any(|h| h.unreachable.is_some()) { exit::UNAVAILABLE } else { exit::OK };
    if args.json {
        return Ok((serde_json::to_string_pretty(&found).map_err(CliError::internal)?, code));
    }
    if args.toml {
        return Ok((toml_out(&lab, &found, &opts), code));
    }
    Ok((render(&found), code))
}

fn chosen_hosts(lab: &Lab, wanted: &[String]) -> Result<Vec<Host>, CliError> {
    for h in wanted {
        context::check_host_arg(lab, h)?;
    }
    Ok(lab.hosts.iter().filter(|h| wanted.is_empty() || wanted.contains(&h.name)).cloned().collect())
}

fn toml_out(lab: &Lab, found: &[HostFindings], opts: &DiscoverOptions) -> String {
    let blocks = discover::device_blocks(found, &discover::names_in(lab), &ReachArgs::reached(opts));
    let into = match lab.source.to_str() {
        Some("<embedded>") => "lab.toml (there is none here: `lab init` writes one)".to_string(),
        _ => lab.source.display().to_string(),
    };
    let mut out = format!("# Found by `lab discover`; paste into {into} (docs/first-phone.md).\n");
    if discover::has_phones(found) && phones_cannot_reach(&lab.endpoint) {
        let url = discover::lan_address().map_or_else(|| "http://192.0.2.10:8765".into(), discover::endpoint_url);
        out.push_str("# Phones cannot reach this machine's loopback: add these two lines under [lab]:\n");
        for l in discover::endpoint_lines(&url).lines() {
            let _ = writeln!(out, "#   {l}");
        }
    }
    out.push('\n');
    if found.iter().all(|h| h.phones.is_empty()) {
        out.push_str("# No phone found (`lab discover` says what could not be looked at).\n");
    } else if blocks.is_empty() {
        out.push_str("# Nothing new: every phone found is in the lab file already.\n");
    }
    out.push_str(&blocks);
    out
}
