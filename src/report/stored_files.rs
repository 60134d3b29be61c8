//! A campaign's report files written from the store, with its summaries stored beside
//! them: what `lab run` does when a campaign ends and `lab report` when the store changed.

use std::path::{Path, PathBuf};

use super::files::{ReportFiles, write_all_with, write_stamp};
use super::model::build_report::build_report;
use super::model::input::{CampaignData, ReportError, load_stamped};
use super::model::report::Report;
use super::model::summaries::summary_rows;
use super::render::table::render_table;
use crate::store::Store;

/// What [`write_campaign_files`] wrote.
#[derive(Debug, Clone)]
pub struct WrittenFiles {
    /// The five files, in the order they are listed to people.
    pub paths: Vec<PathBuf>,
    /// The report's terminal tables.
    pub tables: String,
}

/// Writes the report files of campaign `id` into `dir` and its summaries into the store
/// (for `lab history` and schedule reviews).
pub fn write_campaign_files(store: &Store, id: &str, dir: &Path) -> Result<WrittenFiles, ReportError> {
    let (data, stamp) = load_stamped(store, id)?;
    let rep = write_report(store, id, &data, dir, &stamp)?;
    let paths = ReportFiles::in_dir(dir).all().into_iter().cloned().collect();
    Ok(WrittenFiles { paths, tables: render_table(&rep) })
}

/// Builds the report of `data`, stores its summaries and writes its files and `stamp`.
pub fn write_report(
    store: &Store,
    id: &str,
    data: &CampaignData,
    dir: &Path,
    stamp: &str,
) -> Result<Report, ReportError> {
    // results.csv is written while the report is built and its summaries stored. Files
    // written without their summaries stored are still the store's; only the stamp waits.
    let mut stored = Ok(());
    let (rep, _) = write_all_with(data, dir, || {
        let rep = build_report(data);
        stored = store.put_summaries(id, &summary_rows(&rep, data));
        Ok::<_, std::io::Error>(rep)
    })?;
    stored?;
    write_stamp(dir, stamp)?;
    Ok(rep)
}
