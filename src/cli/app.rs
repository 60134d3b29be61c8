//! Dispatch: parse arguments, run the command, print, exit with a documented code.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use super::args::{Cli, Command};
use super::exit::{self, CliError};
use super::{
    care_cmd, changes_cmd, compare_cmd, completions_cmd, confirm_cmd, history_cmd, hosts_cmd, hubs_cmd, import_cmd,
    man_cmd, noise_cmd, plan_cmd, report_cmd, rerun_cmd, run_cmd, schedule_cmd, status_cmd, status_watch, store_cmd,
};

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { exit::BAD_INPUT } else { exit::OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // `lab serve` runs on one thread: a page watching the lab costs one wake of one thread
    // a second (src/cli/serve/live.rs, benches/serve.rs).
    let mut builder = match &cli.command {
        Command::Serve(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    // An agent's threads wake often and run little: short slices get them on a core sooner
    // (src/runner/slices.rs). Best effort: a kernel that refuses leaves them as they were.
    if matches!(&cli.command, Command::Agent(_)) {
        builder.on_thread_start(|| {
            let _ = crate::runner::ask_short_slice();
        });
    }
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => return fail(CliError::internal(format!("cannot start the async runtime: {e}"))),
    };
    let lab = cli.lab.as_deref();
    let result: Result<(String, u8), CliError> = match &cli.command {
        Command::Run(a) => runtime.block_on(run_cmd::run(lab, a)).map(|o| (o.output, o.code)),
        Command::Rerun(a) => runtime.block_on(rerun_cmd::run(lab, a)),
        Command::Submit(a) => super::submit_cmd::run(lab, a),
        Command::Wait(a) => runtime.block_on(super::wait_cmd::run(lab, a)).map(|o| (o.output, o.code)),
        Command::Cancel(a) => super::cancel_cmd::run(lab, a),
        Command::Agent(a) => runtime.block_on(super::agent_cmd::run(lab, a)),
        Command::Plan(a) => plan_cmd::run(lab, a).map(|s| (s, exit::OK)),
        // The watch prints each drawing itself, as it comes.
        Command::Status(a) if a.watch => {
            runtime.block_on(status_watch::run(lab, a)).map(|()| (String::new(), exit::OK))
        }
        Command::Status(a) => status_cmd::run(lab, a).map(|s| (s, exit::OK)),
        Command::Report(a) => report_cmd::run(lab, a).map(|s| (s, exit::OK)),
        Command::Import(a) => import_cmd::run(lab, a).map(|s| (s, exit::OK)),
        Command::Hosts(a) => runtime.block_on(hosts_cmd::run(lab, a)),
        Command::Hubs(a) => runtime.block_on(hubs_cmd::run(lab, a)),
        Command::Discover(a) => runtime.block_on(super::discover_cmd::run(lab, a)),
        Command::Init(a) => runtime.block_on(super::init_cmd::run(lab, a)),
        Command::Compare(a) => compare_cmd::run(lab, a),
        Command::Confirm(a) => confirm_cmd::run(lab, a).map(|s| (s, exit::OK)),
        Command::Serve(a) => runtime.block_on(super::serve::run(lab, a)),
        Command::Care(a) => runtime.block_on(care_cmd::run(lab, a)),
        Command::Changes(a) => changes_cmd::run(a).map(|s| (s, exit::OK)),
        Command::Schedule(a) => runtime.block_on(schedule_cmd::run(lab, a)),
        Command::History(a) => history_cmd::run(lab, a).map(|s| (s, exit::OK)),
        Command::Noise(a) => noise_cmd::run(lab, a).map(|s| (s, exit::OK)),
        Command::Store(a) => super::context::load_lab(lab).and_then(|l| store_cmd::run(&l, a)).map(|s| (s, exit::OK)),
        Command::Artifacts(a) => {
            super::context::load_lab(lab).and_then(|l| runtime.block_on(super::artifacts_cmd::run(&l, a)))
        }
        Command::Completions(a) => completions_cmd::run(a).map(|s| (s, exit::OK)),
        Command::Man(a) => man_cmd::run(a).map(|s| (s, exit::OK)),
    };
    match result {
        Ok((out, code)) => {
            // A reader that went away (`lab … | head`) is not an error worth a panic.
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(out.as_bytes());
            if !out.is_empty() && !out.ends_with('\n') {
                let _ = stdout.write_all(b"\n");
            }
            let _ = stdout.flush();
            ExitCode::from(code)
        }
        Err(e) => fail(e),
    }
}

fn fail(e: CliError) -> ExitCode {
    for line in e.message.lines() {
        eprintln!("error: {line}");
    }
    ExitCode::from(e.code)
}
