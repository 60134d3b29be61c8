//! `lab import KIND FILE… [--package P] [--json] [--variant V --device D [--campaign C]]`:
//! parse captured device output, print its metrics, and optionally attach it as a trial.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::context::{self, display_path};
use super::exit::CliError;
use crate::import::{self, AttachError, AttachRequest, Attached, ImportError, ImportKind, ImportOptions, Imported};

// Clap lives in the CLI only: the import kinds offer themselves as `KIND` values here, with
// the names and one-line help a derive would give them.
impl clap::ValueEnum for ImportKind {
    fn value_variants<'a>() -> &'a [Self] {
        &ImportKind::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()).help(self.about()))
    }
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// What the files hold.
    #[arg(value_enum)]
    pub kind: ImportKind,
    /// The captured output. android-battery, ios-battery and proc-stat also take two files:
    /// before and after a trial (the difference is the trial's cost).
    #[arg(required = true, num_args = 1..=2, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// One app's figures (package name), for android-batterystats and android-cpuinfo.
    #[arg(long, value_name = "PACKAGE")]
    pub package: Option<String>,
    /// Print JSON for scripts instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Clock ticks per second of /proc/<pid>/stat times (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100, value_name = "HZ")]
    pub clk_tck: u64,
    /// Attach the files as a trial of this variant (with --device).
    #[arg(long, requires = "device", value_name = "NAME")]
    pub variant: Option<String>,
    /// The device the files came from (with --variant).
    #[arg(long, requires = "variant", value_name = "NAME")]
    pub device: Option<String>,
    /// Campaign to attach to; created if it does not exist. Default: a new `import-<time>` campaign.
    #[arg(long, requires = "variant", value_name = "ID")]
    pub campaign: Option<String>,
    /// Device model for the report (default: the lab's entry for --device, else `imported`).
    #[arg(long, requires = "variant", value_name = "MODEL")]
    pub model: Option<String>,
}

impl From<ImportError> for CliError {
    fn from(e: ImportError) -> Self {
        CliError::bad_input(e)
    }
}

impl From<AttachError> for CliError {
    fn from(e: AttachError) -> Self {
        match e {
            AttachError::BadName { .. } | AttachError::Running(_) => CliError::bad_input(e),
            AttachError::Store(s) => s.into(),
            other => CliError::internal(other),
        }
    }
}

#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    imported: &'a Imported,
    #[serde(skip_serializing_if = "Option::is_none")]
    attached: Option<&'a Attached>,
}

pub fn run(lab_arg: Option<&Path>, args: &ImportArgs) -> Result<String, CliError> {
    let opts = ImportOptions { package: args.package.clone(), ticks_per_s: args.clk_tck.max(1) };
    let imported = import::run(args.kind, &args.files, &opts)?;
    let attached = match (&args.variant, &args.device) {
        (Some(variant), Some(device)) => {
            let lab = context::load_lab(lab_arg)?;
            let store = context::open_store(&lab)?;
            let req = AttachRequest {
                campaign: args.campaign.clone(),
                variant: variant.clone(),
                device: device.clone(),
                model: args.model.clone(),
            };
            let attached = import::attach(&store, &lab, &req, &imported, &args.files)?;
            upload_attached(&lab, &store, &attached)?;
            Some(attached)
        }
        _ => None,
    };
    if args.json {
        let out = Output { imported: &imported, attached: attached.as_ref() };
        return serde_json::to_string_pretty(&out).map_err(CliError::internal);
    }
    Ok(render(&imported, attached.as_ref()))
}

/// With a bucket, the attached trial's files go there as a campaign's do (read back,
/// confirmed); an object store that is away leaves them local and pending, and the
/// import stands. Said on stderr, beside the output that other tools read.
fn upload_attached(lab: &crate::config::Lab, store: &crate::store::Store, a: &Attached) -> Result<(), CliError> {
    let raw = crate::store::RawFiles::of_lab(lab)?;
    let Some(bucket) = raw.bucket() else { return Ok(()) };
    let Some(sub) = a.artifact_dir.file_name().map(|f| f.to_string_lossy().into_owned()) else { return Ok(()) };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(CliError::internal)?;
    match runtime.block_on(raw.put(store, &a.campaign, &sub)) {
        Ok((files, bytes)) => {
            eprintln!("raw files: {files} uploaded and confirmed in {} ({bytes} bytes)", bucket.place())
        }
        Err(e) => eprintln!("raw files: kept local and pending ({e})"),
    }
    Ok(())
}

#[derive(Tabled)]
struct MetricLine {
    metric: String,
    value: String,
    unit: String,
    source: String,
}

#[derive(Tabled)]
struct AppLine {
    app: String,
    #[tabled(rename = "est. mAh")]
    mah: String,
    #[tabled(rename = "CPU ms")]
    cpu: String,
    #[tabled(rename = "rx bytes")]
    rx: String,
    #[tabled(rename = "tx bytes")]
    tx: String,
    #[tabled(rename = "wake lock ms")]
    wakelock: String,
}

/// Up to 3 decimals, without trailing zeros.
fn num(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.to_string() }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |x| x.to_string())
}

/// Apps shown in the table; `--json` has all of them.
const APPS_SHOWN: usize = 15;

fn render(imp: &Imported, attached: Option<&Attached>) -> String {
    let mut out = String::new();
    let files: Vec<String> = imp.files.iter().map(|f| display_path(Path::new(f))).collect();
    let _ = writeln!(out, "{}: {}", imp.kind.name(), files.join(" → "));
    if let Some(v) = imp.parsed.get("checkin_version").and_then(|v| v.get("checkin")) {
        let _ = writeln!(out, "checkin version {v}");
    }
    if let Some(d) = imp.parsed.get("discharge").filter(|d| !d.is_null()) {
        let g = |k: &str| d.get(k).filter(|v| !v.is_null()).map_or_else(|| "-".to_string(), |v| v.to_string());
        let _ = writeln!(
            out,
            "discharge since charge: {}–{} % (screen on {} %, off {} %), {} mAh by the coulomb counter",
            g("low_pct"),
            g("high_pct"),
            g("screen_on_pct"),
            g("screen_off_pct"),
            g("total_mah")
        );
    }
    if let Some(h) = imp.parsed.get("history").filter(|h| h.get("records").and_then(|r| r.as_u64()).unwrap_or(0) > 0) {
        let g = |k: &str| h.get(k).map_or_else(String::new, |v| v.to_string());
        let span = match (h.get("start_ms").and_then(|v| v.as_i64()), h.get("end_ms").and_then(|v| v.as_i64())) {
            (Some(a), Some(b)) => format!(" over {} ms", b - a),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "history: {} records{span}, {} screen changes, {} wake lock slices",
            g("records"),
            g("screen_changes"),
            g("wakelock_slices")
        );
    }
    for w in imp.parsed.get("warnings").and_then(|w| w.as_array()).into_iter().flatten() {
        let _ = writeln!(out, "warning: {}", w.as_str().unwrap_or_default());
    }
    if let Some(apps) = &imp.apps
        && !apps.is_empty()
    {
        let lines: Vec<AppLine> = apps
            .iter()
            .take(APPS_SHOWN)
            .map(|a| AppLine {
                app: a.name.clone(),
                mah: opt(a.estimated_mah.map(num)),
                cpu: opt(a.cpu_ms()),
                rx: opt(a.network.as_ref().map(|n| n.rx_bytes())),
                tx: opt(a.network.as_ref().map(|n| n.tx_bytes())),
                wakelock: a.wakelock_partial_ms.to_string(),
            })
            .collect();
        out.push('\n');
        out.push_str(&Table::new(lines).with(Style::rounded()).to_string());
        out.push('\n');
        if apps.len() > APPS_SHOWN {
            let _ = writeln!(out, "… {} more apps (use --package or --json)", apps.len() - APPS_SHOWN);
        }
    }
    out.push('\n');
    if imp.metrics.is_empty() {
        out.push_str("no metrics\n");
    } else {
        let lines: Vec<MetricLine> = imp
            .metrics
            .iter()
            .map(|m| MetricLine {
                metric: m.metric.clone(),
                value: num(m.value),
                unit: m.unit.clone(),
                source: m.source.clone(),
            })
            .collect();
        out.push_str(&Table::new(lines).with(Style::rounded()).to_string());
        out.push('\n');
    }
    if let Some(a) = attached {
        let _ = writeln!(
            out,
            "\nattached as trial {} of {}campaign {}; files in {}\nreport: lab report {}",
            a.trial_key,
            if a.created_campaign { "new " } else { "" },
            a.campaign,
            display_path(&a.artifact_dir),
            a.campaign
        );
    }
    out
}
