//! `lab changes FILE.csv [--column C] [--window N] [--max-pvalue P] [--min-magnitude M] [--json]`:
//! change points of one column of any CSV, as Apache Otava's CSV mode finds them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use tabled::builder::Builder;
use tabled::settings::Style;

use super::context::display_path;
use super::exit::CliError;
use crate::stats::{ChangePoint, ChangePointOptions, change_points};

#[derive(Debug, clap::Args)]
pub struct ChangesArgs {
    /// A CSV file with a header row: a time or label column first, then numbers.
    #[arg(value_name = "FILE.csv")]
    pub file: PathBuf,
    /// The column to analyse. Default: the only numeric column after the first.
    #[arg(long, value_name = "NAME")]
    pub column: Option<String>,
    /// Points per analysis window (Otava's `window_len`).
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub window: usize,
    /// Keep a change point only when its p-value is below this.
    #[arg(long, default_value_t = 0.001, value_name = "P")]
    pub max_pvalue: f64,
    /// … and its relative change of means above this (0.05: 5 %).
    #[arg(long, default_value_t = 0.0, value_name = "M")]
    pub min_magnitude: f64,
    /// Print JSON for scripts instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The column read from the file, with the first column's cells as labels.
struct Series {
    column: String,
    /// The first column's name, when it is not the series itself.
    label_column: Option<String>,
    labels: Vec<String>,
    values: Vec<f64>,
}

#[derive(Serialize)]
struct Output<'a> {
    file: String,
    column: &'a str,
    label_column: Option<&'a str>,
    points: usize,
    options: ChangePointOptions,
    change_points: Vec<Line<'a>>,
}

#[derive(Serialize)]
struct Line<'a> {
    #[serde(flatten)]
    point: &'a ChangePoint,
    /// The first column's cell at `index`.
    label: Option<&'a str>,
    /// 100 × (mean after / mean before − 1); `null` when the mean before is 0.
    change_pct: Option<f64>,
}

pub fn run(args: &ChangesArgs) -> Result<String, CliError> {
    let series = read(&args.file, args.column.as_deref())?;
    let options =
        ChangePointOptions { window_len: args.window, max_pvalue: args.max_pvalue, min_magnitude: args.min_magnitude };
    let found = change_points(&series.values, &options).map_err(CliError::bad_input)?;
    let lines: Vec<Line> = found
        .iter()
        .map(|c| Line {
            label: series.label_column.as_ref().map(|_| series.labels[c.index].as_str()),
            point: c,
            change_pct: c.relative_change().map(|r| r * 100.0),
        })
        .collect();
    let out = Output {
        file: display_path(&args.file),
        column: &series.column,
        label_column: series.label_column.as_deref(),
        points: series.values.len(),
        options,
        change_points: lines,
    };
    if args.json {
        return serde_json::to_string_pretty(&out).map_err(CliError::internal);
    }
    Ok(render(&out))
}

/// Reads the header and every row; a cell that is not a number is an error, never skipped
/// (Otava's CSV importer does the same).
fn read(path: &Path, column: Option<&str>) -> Result<Series, CliError> {
    let file = display_path(path);
    let bad = |msg: String| CliError::bad_input(format!("{file}: {msg}"));
    let reader = std::fs::File::open(path)
        .map_err(|e| bad(format!("cannot read it: {e}; fix: pass the path of a CSV file with a header row")))?;
    let mut csv = csv::ReaderBuilder::new().has_headers(true).from_reader(reader);
    let headers: Vec<String> = csv.headers().map_err(|e| bad(csv_problem(&e)))?.iter().map(str::to_string).collect();
    if headers.is_empty() || headers.iter().all(String::is_empty) {
        return Err(bad("no header row; fix: start the file with the column names, e.g. `time,value`".into()));
    }
    let mut rows: Vec<(u64, Vec<String>)> = Vec::new();
    for record in csv.records() {
        let record = record.map_err(|e| bad(csv_problem(&e)))?;
        let line = record.position().map_or(0, |p| p.line());
        rows.push((line, record.iter().map(|c| c.trim().to_string()).collect()));
    }
    let listed = headers.iter().map(|h| format!("`{h}`")).collect::<Vec<_>>().join(", ");
    let at = match column {
        Some(name) => headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| bad(format!("no column `{name}` (columns: {listed}); fix: --column with one of them")))?,
        None => default_column(&headers, &rows)
            .map_err(|msg| bad(format!("{msg} (columns: {listed}); fix: --column NAME")))?,
    };
    let mut values = Vec::with_capacity(rows.len());
    for (line, cells) in &rows {
        let cell = cells.get(at).map_or("", String::as_str);
        match number(cell) {
            Some(v) => values.push(v),
            None => {
                let what = if cell.is_empty() { "an empty cell".to_string() } else { format!("`{cell}`") };
                return Err(CliError::bad_input(format!(
                    "{file}:{line}: column `{}`: {what} is not a number; fix: every cell of the column must be a \
finite number (rows are not skipped)",
                    headers[at]
                )));
            }
        }
    }
    Ok(Series {
        column: headers[at].clone(),
        label_column: (headers.len() > 1).then(|| headers[0].clone()),
        labels: rows
            .into_iter()
            .map(|(_, mut cells)| if cells.is_empty() { String::new() } else { cells.swap_remove(0) })
            .collect(),
        values,
    })
}

/// One column: that one. Two: the second. More: the only one after the first whose every
/// cell is a number.
fn default_column(headers: &[String], rows: &[(u64, Vec<String>)]) -> Result<usize, NoSeriesColumn> {
    if headers.len() <= 2 {
        return Ok(headers.len() - 1);
    }
    let numeric: Vec<usize> = (1..headers.len())
        .filter(|&c| rows.iter().all(|(_, cells)| cells.get(c).is_some_and(|v| number(v).is_some())))
        .collect();
    match numeric.as_slice() {
        [one] => Ok(*one),
        [] => Err(NoSeriesColumn::NoneNumeric { first: headers[0].clone() }),
        many => Err(NoSeriesColumn::Several { names: many.iter().map(|&c| headers[c].clone()).collect() }),
    }
}

/// Why no column is the series by default (the user then names one with --column).
#[derive(Debug, thiserror::Error)]
enum NoSeriesColumn {
    #[error("no column after `{first}` holds only numbers")]
    NoneNumeric { first: String },
    #[error(
        "{} columns could be the series: {}",
        names.len(),
        names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    )]
    Several { names: Vec<String> },
}

fn number(cell: &str) -> Option<f64> {
    cell.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A malformed row (a field too many, not UTF-8), with its line.
fn csv_problem(e: &csv::Error) -> String {
    let line = e.position().map_or_else(String::new, |p| format!("line {}: ", p.line()));
    let what = match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("{len} field(s) where the header has {expected_len}")
        }
        csv::ErrorKind::Utf8 { .. } => "not UTF-8 text".into(),
        _ => e.to_string(),
    };
    format!("{line}{what}; fix: a comma-separated file with as many fields on every row as in its header")
}

fn render(out: &Output) -> String {
    let o = &out.options;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "`{}` in {}: {} points; window {}, max p {}, min magnitude {}",
        out.column, out.file, out.points, o.window_len, o.max_pvalue, o.min_magnitude
    );
    let n = out.change_points.len();
    if n == 0 {
        s.push_str("no change points\n");
        return s;
    }
    let plural = if n == 1 { "" } else { "s" };
    let _ = writeln!(s, "{n} change point{plural} (index: the first point of the new level, from 0)");
    let mut table = Builder::default();
    table.push_record(["index", out.label_column.unwrap_or("label"), "mean before → after", "change", "p"]);
    for l in &out.change_points {
        let t = &l.point.test;
        table.push_record([
            l.point.index.to_string(),
            l.label.unwrap_or("-").to_string(),
            format!("{} → {}", num(t.mean_before), num(t.mean_after)),
            l.change_pct.map_or_else(|| "-".into(), |c| format!("{c:+.1} %")),
            crate::text::p_value::scientific(t.pvalue),
        ]);
    }
    s.push_str(&table.build().with(Style::rounded()).to_string());
    s.push('\n');
    s
}

/// Up to 4 significant decimals, without trailing zeros.
fn num(x: f64) -> String {
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.to_string() }
}
