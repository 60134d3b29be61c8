//! Command-line arguments (clap).

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "lab",
    version,
    about = "Reproducible device-lab orchestrator: builds × configs × devices × repeats, with statistics"
)]
pub struct Cli {
    /// The lab inventory. Default: ./lab.toml if present, else the built-in default lab
    /// (simulated phones on this machine). Also settable with LAB_CONFIG.
    #[arg(long, global = true, env = "LAB_CONFIG", value_name = "FILE")]
    pub lab: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a campaign: every trial of a runbook, devices in parallel.
    Run(RunArgs),
    /// Run a campaign again from its manifest (same runbook, seed and order), refusing when
    /// a build changed, then compare the two. Exits 5 when a gating metric came out worse.
    Rerun(super::rerun_cmd::RerunArgs),
    /// Show what a runbook would run: variants, trials per device, order, time.
    Plan(PlanArgs),
    /// Show the lab's devices and campaigns (works while `lab run` is going).
    Status(StatusArgs),
    /// Print a campaign's report again, or write it in another format.
    Report(ReportArgs),
    /// Parse captured device output (batterystats, dumpsys, battery registry, …) and print
    /// its metrics; with --variant and --device, attach it as a trial of a campaign.
    Import(super::import_cmd::ImportArgs),
    /// Compare two campaigns of one runbook (e.g. last week and this week): every
    /// variant × model × metric of B against A. Exits 5 when a gating metric is worse.
    Compare(CompareArgs),
    /// Lab hosts: `lab hosts check` tests reachability, host keys, login and tools;
    /// `lab hosts forward` reaches a port or Unix socket on a host from this machine.
    Hosts(HostsArgs),
    /// USB hubs: every host's hubs and ports as `uhubctl` lists them, and which port each
    /// of the lab's phones is on (by its USB serial).
    Hubs(HubsArgs),
    /// What is attached to each host: Android phones, iPhones, the hub port each is on,
    /// power monitors; whether lab.toml has them, and what keeps them from use. Read-only.
    Discover(super::discover_cmd::DiscoverArgs),
    /// Write a new lab.toml in this folder (never over one): this machine, the SSH hosts
    /// given, and the phones found on them.
    Init(super::init_cmd::InitArgs),
    /// Keep each hub-powered phone between the charge limits of `[care]` by switching its
    /// port, until Ctrl-C; every port it cut is switched on again when it stops.
    Care(CareArgs),
    /// Change points of one column of a CSV file (E-divisive means with a t-test, as Apache
    /// Otava finds them): where the series moved to a new level.
    Changes(super::changes_cmd::ChangesArgs),
    /// Answer an operator step a running campaign waits on (a `[[steps]]` entry, a manual
    /// tether's unplug / plug-in), with what it asks to attest.
    Confirm(super::confirm_cmd::ConfirmArgs),
    /// The lab in a browser: devices and queue, campaigns and their reports
    /// (docs/serve.md). Binds 127.0.0.1:8470 unless told otherwise.
    Serve(super::serve::ServeArgs),
    /// Schedules of lab.toml (`[[schedule]]`): list them, run what is due, keep running
    /// them (`daemon`), or print a systemd timer, crontab line or launchd plist.
    Schedule(super::schedule_cmd::ScheduleArgs),
    /// Every campaign of a runbook, one point per variant × model × metric, with change
    /// points and what the schedule's reviews found (table, JSON or an HTML page with plots).
    History(super::history_cmd::HistoryArgs),
    /// The store itself: `lab store copy FROM TO` copies every campaign and the schedule's
    /// history from one store into another (SQLite into PostgreSQL or back), resumably.
    Store(super::store_cmd::StoreArgs),
    /// Print a shell completion script to stdout, e.g.
    /// `lab completions bash > ~/.local/share/bash-completion/completions/lab`.
    Completions(super::completions_cmd::CompletionsArgs),
    /// Print the man page (roff) to stdout, e.g. `lab man > ~/.local/share/man/man1/lab.1`;
    /// `lab man run` prints the page of `lab run` (lab-run.1).
    Man(super::man_cmd::ManArgs),
}

#[derive(Debug, clap::Args)]
pub struct CareArgs {
    /// One pass: read each phone, switch what is outside its window, stop.
    #[arg(long)]
    pub once: bool,
    /// Only this device (repeatable); default: every device tethered to a hub port.
    #[arg(long, value_name = "DEVICE")]
    pub device: Vec<String>,
    /// Stop after this long (e.g. `8h`; for simulated phones, time on their virtual clock).
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_for)]
    pub for_: Option<std::time::Duration>,
    /// A line for every reading too, not only for switches.
    #[arg(long, short)]
    pub verbose: bool,
}

/// `--for`'s value; clap prints the error's message after the flag.
fn parse_for(s: &str) -> Result<std::time::Duration, crate::config::ValueError> {
    crate::config::parse_duration(s)
}

#[derive(Debug, clap::Args)]
pub struct HubsArgs {
    /// Only this `[[host]]` of lab.toml.
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Print the hubs, ports and phones as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct HostsArgs {
    #[command(subcommand)]
    pub command: HostsCommand,
    /// Print the checks (or the forward's address) as JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum HostsCommand {
    /// Connect to every host: reachability, latency, host key, login, and the tools its devices need.
    Check,
    /// Listen on 127.0.0.1 and lead every connection to a TCP port or Unix socket on a host
    /// (e.g. usbmuxd's socket, an adb server), until Ctrl-C.
    Forward(ForwardArgs),
}

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

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum MessageFormat {
    Human,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    pub runbook: PathBuf,
    #[arg(long)]
    pub json: bool,
    /// Show every trial in run order, not just the first block per device.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print the status as JSON (with --watch: one compact object per line).
    #[arg(long)]
    pub json: bool,
    /// Keep going: redraw whenever the store changes (checked once a second), until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ReportFormat {
    Table,
    Md,
    Html,
    Json,
    Csv,
    // The verdicts as JUnit XML for CI servers (docs/ci.md).
    Junit,
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Campaign id; default: the newest campaign.
    pub campaign: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum CompareFormat {
    Table,
    Md,
    Json,
    // The verdicts as JUnit XML for CI servers (docs/ci.md); the exit code stays 5 on a regression.
    Junit,
}

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Campaign A, the reference (e.g. last week's).
    pub before: String,
    /// Campaign B, compared with A (e.g. this week's).
    pub after: String,
    #[arg(long, value_enum, default_value = "table")]
    pub format: CompareFormat,
}
