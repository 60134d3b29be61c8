//! `lab rerun CAMPAIGN [--on LAB]`: the campaign again from its manifest — the same
//! runbook, seed and so order — then the two compared.

use std::path::{Path, PathBuf};

use super::campaign_run::{self, MessageFormat};
use super::comparison::{CompareFormat, compare};
use super::context::{self, existing_store};
use super::exit::{self, CliError};
use super::reporter::Output;
use crate::plan::Plan;
use crate::runner::Start;
use crate::runner::{MANIFEST_FILE, Manifest};

#[derive(Debug, clap::Args)]
pub struct RerunArgs {
    /// The campaign to run again (id from `lab status`).
    pub campaign: String,
    /// Run it on this lab file instead (its devices and its store); the original is read
    /// from the store of the lab it ran on (`--lab`).
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
    #[command(flatten)]
    pub queue: campaign_run::QueueArgs,
}

/// The re-run's output and the comparison. Exits 5 when a gating metric came out worse;
/// else with the run's code (0, or 4 when some trials failed every attempt); a run that
/// did not finish (3, 130) is not compared.
pub async fn run(lab_arg: Option<&Path>, args: &RerunArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    let store = existing_store(&lab)?;
    let record = store.campaign_without_plan(&args.campaign)?;
    if record.runbook_text.trim().is_empty() {
        return Err(CliError::bad_input(format!(
            "campaign {} was attached by `lab import`, not run: it has no runbook to run again; fix: re-run a campaign \
`lab run` made (`lab status` lists them)",
            record.id
        )));
    }
    // Its manifest; a campaign from before manifests gets one from its record.
    // Read where the lab's raw files are: the bucket once its upload is confirmed, else
    // the local folder (the campaign may have run on another machine).
    let raw = crate::store::RawFiles::of_lab(&lab)?;
    let text = match raw.read(&store, &record.id, MANIFEST_FILE).await {
        Ok(bytes) => Some(bytes),
        Err(crate::store::RawFilesError::Local { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let manifest = if let Some(bytes) = text {
        let shown = format!("{}/{MANIFEST_FILE}", record.id);
        Manifest::parse(&String::from_utf8_lossy(&bytes), &shown).map_err(|e| CliError::bad_input(e.to_string()))?
    } else {
        // The whole plan: the manifest lists every planned trial.
        let plan: Plan = serde_json::from_value(store.campaign(&record.id)?.plan_json)
            .map_err(|e| CliError::internal(format!("campaign {}: stored plan unreadable: {e}", record.id)))?;
        let runbook = crate::config::parse_runbook(&record.runbook_text, Path::new(&record.runbook_path), &lab)?;
        Manifest::of(&record, &runbook, &plan, &lab, &Default::default())
    };
    let target = match &args.on {
        Some(path) => context::load_lab(Some(path))?,
        None => lab.clone(),
    };
    let (target_store, target_artifacts) = (target.clone(), target.artifacts_dir.clone());
    let output = match args.message_format {
        MessageFormat::Json => Output::EventStream,
        MessageFormat::Human => Output::Human,
    };
    let start = Start::Manifest { manifest: Box::new(manifest), allow_changed_builds: args.allow_changed_builds };
    let ran =
        campaign_run::run_until_ctrl_c(target, start, campaign_run::queueing(args.queue), output, args.verbose).await?;
    if ran.code != exit::OK && ran.code != exit::TRIALS_FAILED {
        return Ok((ran.output, ran.code));
    }
    let new_store = context::open_store(&target_store)?;
    let format = if ran.stream.is_some() { CompareFormat::Json } else { CompareFormat::Table };
    let compared = compare((&store, &record.id), (&new_store, &ran.campaign), format).map_err(|e| {
        CliError::new(
            e.code,
            format!(
                "{}; the re-run {} is recorded: compare it with `lab compare {} {}`",
                e.message, ran.campaign, record.id, ran.campaign
            ),
        )
    })?;
    let (cmp, cmp_code) = compared;
    let code = if cmp_code == exit::REGRESSION { cmp_code } else { ran.code };
    if let Some(mut stream) = ran.stream {
        // The stream's last line: the comparison, and how the process exits.
        let comparison: serde_json::Value = serde_json::from_str(&cmp).map_err(CliError::internal)?;
        let last = serde_json::json!({
            "event": "comparison", "before": record.id, "after": ran.campaign, "exit_code": code, "comparison": comparison
        });
        if let serde_json::Value::Object(fields) = last {
            stream.write(fields);
        }
        return Ok((String::new(), code));
    }
    let mut out = ran.output;
    out.push_str(&format!(
        "\nre-run of {} as {} (store {}):\n\n",
        record.id,
        ran.campaign,
        context::display_store(&target_store)
    ));
    let new_manifest = Manifest::read(&target_artifacts.join(&ran.campaign).join(MANIFEST_FILE));
    if new_manifest.is_ok_and(|m| m.plan_changed) {
        out.push_str("note: the plan differs from the campaign's (other devices or order: the lab file is another, or changed since)\n\n");
    }
    out.push_str(&cmp);
    Ok((out, code))
}
