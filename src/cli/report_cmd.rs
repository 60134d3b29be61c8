//! `lab report [CAMPAIGN]`, and the report files written after `lab run`.

use std::path::Path;

use super::context::{self, existing_store};
use super::exit::CliError;
use crate::report;

#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
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

pub fn run(lab_arg: Option<&Path>, args: &ReportArgs) -> Result<String, CliError> {
    let lab = context::load_lab(lab_arg)?;
    let store = existing_store(&lab)?;
    let id = match &args.campaign {
        Some(id) => id.clone(),
        None => store.latest_campaign_id()?.ok_or_else(|| {
            CliError::bad_input("the store has no campaigns yet; fix: lab run runbooks/quickstart.toml")
        })?,
    };
    let dir = lab.artifacts_dir.join(&id);
    // The stamp of what was read, so a trial recorded meanwhile makes the next report rewrite.
    let (data, stamp) = report::load_stamped(&store, &id)?;
    let current = report::files_current(&dir, &stamp) && store.summaries_current(&id)?;
    if matches!(args.format, ReportFormat::Csv) {
        if !current {
            report::write_report(&store, &id, &data, &dir, &stamp)?;
        }
        // Streamed from the columns: a million rows never become one String.
        let mut stdout = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        return match report::write_results_csv(&data, &mut stdout) {
            // A reader that went away (`lab report --format csv | head`) is not an error.
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::internal(e)),
            _ => Ok(String::new()),
        };
    }
    // The files in the campaign's folder are rewritten when the store changed, so they
    // always match it.
    let rep =
        if current { report::build_report(&data) } else { report::write_report(&store, &id, &data, &dir, &stamp)? };
    Ok(match args.format {
        ReportFormat::Table => report::render_table(&rep),
        ReportFormat::Md => report::render_markdown(&rep),
        ReportFormat::Html => report::render_html(&rep, &data, &report::battery_curves(&data)),
        ReportFormat::Json => report::render_json(&rep),
        ReportFormat::Junit => report::render_junit(&rep),
        ReportFormat::Csv => unreachable!("streamed above"),
    })
}
