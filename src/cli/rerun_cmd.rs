//! `lab rerun CAMPAIGN [--on LAB]`: the campaign again from its manifest — the same
//! runbook, seed and so order — then the two compared.

use std::path::{Path, PathBuf};

use super::args::{CompareFormat, MessageFormat};
use super::compare_cmd;
use super::context::{self, display_path};
use super::exit::{self, CliError};
use super::report_cmd::existing_store;
use super::reporter::Output;
use super::run_cmd::{self, Start};
use serde::Deserialize;

use crate::plan::Plan;
use crate::runner::{MANIFEST_FILE, Manifest};

#[derive(Debug, clap::Args)]
pub struct RerunArgs {
    /// The campaign to run again (id from `lab status`).
    pub campaign: String,
    /// Run it on this lab file instead (its devices and store); the comparison reads the
    /// original from this lab's store.
    #[arg(long, value_name = "LAB")]
    pub on: Option<PathBuf>,
    /// Go on when a build's files no longer have the campaign's hashes (the new
    /// campaign's manifest and report say which).
    #[arg(long)]
    pub allow_changed_builds: bool,
    /// `json`: the run's events as JSON lines, as `lab run --message-format json`; the
    /// comparison then follows as JSON.
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "human")]
    pub message_format: MessageFormat,
    /// Plain progress: one line per phase change too.
    #[arg(long, short)]
    pub verbose: bool,
}

/// The re-run's output and the comparison; the exit code is the run's when it did not
/// finish cleanly, else the comparison's (5 when a gating metric came out worse).
pub async fn run(lab_arg: Option<&Path>, args: &RerunArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    let store = existing_store(&lab)?;
    let record = store.campaign(&args.campaign)?;
    // Its manifest; a campaign from before manifests gets one from its record.
    let file = lab.artifacts_dir.join(&record.id).join(MANIFEST_FILE);
    let manifest = if file.exists() {
        Manifest::read(&file).map_err(|e| {
            CliError::bad_input(format!("{e}; fix: restore the file, or delete it to use the store's record"))
        })?
    } else {
        let plan = Plan::deserialize(&record.plan_json)
            .map_err(|e| CliError::internal(format!("campaign {}: stored plan unreadable: {e}", record.id)))?;
        let runbook = crate::config::parse_runbook(&record.runbook_text, Path::new(&record.runbook_path), &lab)?;
        Manifest::of(&record, &runbook, &plan, &lab, &Default::default())
    };
    let target = match &args.on {
        Some(path) => context::load_lab(Some(path))?,
        None => lab.clone(),
    };
    let target_store_path = target.store_path.clone();
    let output = match args.message_format {
        MessageFormat::Json => Output::EventStream,
        MessageFormat::Human => Output::Human,
    };
    let start = Start::Manifest { manifest: Box::new(manifest), allow_changed_builds: args.allow_changed_builds };
    let ran = run_cmd::run_until_ctrl_c(target, start, output, args.verbose).await?;
    if ran.code != exit::OK && ran.code != exit::TRIALS_FAILED {
        return Ok((ran.output, ran.code));
    }
    let new_store = crate::store::Store::open(&target_store_path)?;
    let format = if output == Output::EventStream { CompareFormat::Json } else { CompareFormat::Table };
    let (cmp, code) = compare_cmd::compare((&store, &record.id), (&new_store, &ran.campaign), format)?;
    let mut out = ran.output;
    if output != Output::EventStream {
        out.push_str(&format!(
            "\nre-run of {} as {} (store {}):\n\n",
            record.id,
            ran.campaign,
            display_path(&target_store_path)
        ));
    }
    out.push_str(&cmp);
    Ok((out, if ran.code == exit::OK { code } else { ran.code }))
}
