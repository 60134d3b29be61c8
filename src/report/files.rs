//! Writes a campaign's report files next to each other, each atomically.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::model::curves::battery_curves;
use super::model::input::CampaignData;
use super::model::report::Report;
use super::render::csv_out::write_results_csv;
use super::render::html::render_html;
use super::render::json::render_json;
use super::render::markdown::render_markdown;
use super::render::summary_csv::write_summary_csv;
use crate::fs::{with_path, write_atomic, write_atomic_with};

/// Where [`write_all`] put the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportFiles {
    pub markdown: PathBuf,
    pub html: PathBuf,
    pub csv: PathBuf,
    pub summary_csv: PathBuf,
    pub json: PathBuf,
}

impl ReportFiles {
    /// The files' paths in a campaign's folder `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        ReportFiles {
            markdown: dir.join("report.md"),
            html: dir.join("report.html"),
            csv: dir.join("results.csv"),
            summary_csv: dir.join("summary.csv"),
            json: dir.join("report.json"),
        }
    }

    /// In the order they are listed to people.
    pub fn all(&self) -> [&PathBuf; 5] {
        [&self.markdown, &self.html, &self.csv, &self.summary_csv, &self.json]
    }
}

/// Writes `report.md`, `report.html`, `results.csv`, `summary.csv` and `report.json`
/// into `dir` (created if missing), the campaign's artifact folder. Everything comes
/// from `data` (the battery curves from the stored series): no raw file is read.
///
/// Each file is written to a temporary file in `dir` and renamed over the final name, so
/// a reader never sees half a file and an interrupted write leaves the previous version
/// in place. Errors name the file. `results.csv` (the big one) is streamed into its file
/// on a second thread while the others are rendered.
pub fn write_all(report: &Report, data: &CampaignData, dir: &Path) -> io::Result<ReportFiles> {
    write_all_with(data, dir, || Ok::<_, io::Error>(report)).map(|(_, files)| files)
}

/// [`write_all`] of the report `make` gives: `results.csv`, which needs only `data`, is
/// being written while `make` builds the report (and whatever else it does, such as
/// storing summaries). The files are written even if `make` fails, `results.csv` then
/// alone (it is the store's rows, whatever the report).
pub fn write_all_with<R: std::borrow::Borrow<Report>, E: From<io::Error>>(
    data: &CampaignData,
    dir: &Path,
    make: impl FnOnce() -> Result<R, E>,
) -> Result<(R, ReportFiles), E> {
    fs::create_dir_all(dir).map_err(|e| with_path(e, "creating", dir))?;
    let files = ReportFiles::in_dir(dir);
    let report = std::thread::scope(|scope| {
        // A million rows are never one buffer.
        let csv = scope.spawn(|| write_atomic_with(&files.csv, |w| write_results_csv(data, w)));
        let rest = make().and_then(|made| {
            let report = made.borrow();
            let mut summary = Vec::new();
            write_summary_csv(report, &mut summary)?;
            write_atomic(&files.markdown, render_markdown(report).as_bytes())?;
            write_atomic(&files.html, render_html(report, data, &battery_curves(data)).as_bytes())?;
            write_atomic(&files.summary_csv, &summary)?;
            write_atomic(&files.json, render_json(report).as_bytes())?;
            Ok(made)
        });
        let csv = csv.join().unwrap_or_else(|_| Err(io::Error::other("writing results.csv panicked")));
        let report = rest?;
        csv.map(|()| report).map_err(E::from)
    })?;
    Ok((report, files))
}

/// The file next to a campaign's report files saying what they were written from
/// (`Store::report_stamp`, with the lab version and report schema) and how long each is.
const STAMP: &str = ".report-stamp";

/// The stamp of files written from `store_stamp`, of the sizes the five in `dir` have
/// (`None` when one is missing or not a file).
fn stamp_text(dir: &Path, store_stamp: &str) -> Option<String> {
    let files = ReportFiles::in_dir(dir);
    let mut sizes = Vec::new();
    for p in files.all() {
        let meta = fs::metadata(p).ok().filter(|m| m.is_file())?;
        sizes.push(meta.len().to_string());
    }
    Some(format!(
        "lab {} report {} summaries {}\n{store_stamp}\nsizes {}\n",
        env!("CARGO_PKG_VERSION"),
        super::model::report::SCHEMA_VERSION,
        crate::stats::SUMMARY_VERSION,
        sizes.join(" ")
    ))
}

/// Whether the five report files in `dir` were written from what `store_stamp` says,
/// by this lab version, and are still whole (each as long as when it was written): then
/// rewriting them would give the same bytes.
pub fn files_current(dir: &Path, store_stamp: &str) -> bool {
    stamp_text(dir, store_stamp).is_some_and(|want| fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s == want))
}

/// Records that the files in `dir` were just written from `store_stamp`.
pub fn write_stamp(dir: &Path, store_stamp: &str) -> io::Result<()> {
    let text = stamp_text(dir, store_stamp)
        .ok_or_else(|| io::Error::other(format!("a report file is missing in {}", dir.display())))?;
    write_atomic(&dir.join(STAMP), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::build_report;
    use crate::testing::fixture;

    #[test]
    fn writes_every_file_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("reports").join("c1");
        let data = fixture::campaign("c1");
        let report = build_report(&data);
        // An old version is replaced whole.
        fs::create_dir_all(&out).unwrap();
        fs::write(out.join("report.md"), "stale").unwrap();

        let files = write_all(&report, &data, &out).unwrap();
        assert_eq!(files.markdown, out.join("report.md"));
        assert_eq!(fs::read_to_string(&files.markdown).unwrap(), render_markdown(&report));
        assert_eq!(fs::read_to_string(&files.json).unwrap(), render_json(&report));
        let mut csv = Vec::new();
        write_results_csv(&data, &mut csv).unwrap();
        assert_eq!(fs::read(&files.csv).unwrap(), csv);
        let mut names: Vec<String> =
            fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(
            names,
            ["report.html", "report.json", "report.md", "results.csv", "summary.csv"],
            "temporary files left behind"
        );
        assert_eq!(fs::read_to_string(&files.html).unwrap(), render_html(&report, &data, &[]));
    }

    #[test]
    fn results_csv_is_written_while_the_report_is_made_and_alone_when_that_fails() {
        let dir = tempfile::tempdir().unwrap();
        let data = fixture::campaign("c1");
        let mut csv = Vec::new();
        write_results_csv(&data, &mut csv).unwrap();

        let failed = dir.path().join("failed");
        let err = write_all_with(&data, &failed, || Err::<Report, _>(io::Error::other("no summaries"))).unwrap_err();
        assert_eq!(err.to_string(), "no summaries");
        let names: Vec<String> =
            fs::read_dir(&failed).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["results.csv"]);
        assert_eq!(fs::read(failed.join("results.csv")).unwrap(), csv);

        let (made, files) =
            write_all_with(&data, &dir.path().join("ok"), || Ok::<_, io::Error>(build_report(&data))).unwrap();
        assert_eq!(fs::read_to_string(&files.json).unwrap(), render_json(&made));
        assert_eq!(fs::read(&files.csv).unwrap(), csv);
        assert_eq!(fs::read_to_string(&files.markdown).unwrap(), render_markdown(&build_report(&data)));
    }

    #[test]
    fn the_stamp_holds_while_the_files_are_whole_and_not_after_one_is_cut_or_gone() {
        let dir = tempfile::tempdir().unwrap();
        let data = fixture::campaign("c1");
        let files = write_all(&build_report(&data), &data, dir.path()).unwrap();
        assert!(!files_current(dir.path(), "store 1"), "no stamp yet");
        write_stamp(dir.path(), "store 1").unwrap();
        assert!(files_current(dir.path(), "store 1"));
        assert!(!files_current(dir.path(), "store 2"), "the store changed");
        // As after a power loss that kept the stamp but not all of results.csv.
        let csv = fs::OpenOptions::new().write(true).open(&files.csv).unwrap();
        csv.set_len(fs::metadata(&files.csv).unwrap().len() - 1).unwrap();
        assert!(!files_current(dir.path(), "store 1"), "a file cut short");
        write_all(&build_report(&data), &data, dir.path()).unwrap();
        assert!(files_current(dir.path(), "store 1"), "whole again: the same sizes");
        fs::remove_file(&files.json).unwrap();
        assert!(!files_current(dir.path(), "store 1"), "a file gone");
        assert!(write_stamp(dir.path(), "store 1").unwrap_err().to_string().contains("missing"));
    }

    #[test]
    fn a_folder_where_a_file_goes_is_left_alone_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let data = fixture::campaign("c1");
        fs::create_dir_all(dir.path().join("report.md").join("inside")).unwrap();
        let err = write_all(&build_report(&data), &data, dir.path()).unwrap_err();
        assert!(err.to_string().contains("report.md"), "{err}");
        assert!(dir.path().join("report.md/inside").is_dir(), "the folder is where it was");
        let left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
    }

    #[test]
    fn error_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        fs::write(&blocker, "").unwrap();
        let data = fixture::campaign("c1");
        let err = write_all(&build_report(&data), &data, &blocker.join("sub")).unwrap_err();
        assert!(err.to_string().contains(&blocker.join("sub").display().to_string()), "{err}");
    }
}
