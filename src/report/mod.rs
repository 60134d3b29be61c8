//! Reports: tables, Markdown, HTML, CSV, JSON and JUnit XML from a campaign in the store.

mod compare;
mod files;
mod history;
mod junit;
mod model;
mod noise;
mod render;
mod stored_files;

pub use compare::build_compare::{
    COMPARE_SCHEMA_VERSION, CampaignRef, CompareModel, CompareReport, CompareRow, compare_models, compare_reports,
    compare_summaries,
};
pub use compare::render::{render_compare_json, render_compare_markdown, render_compare_table};
pub use files::{ReportFiles, files_current, write_all, write_all_with, write_stamp};
pub use history::build_history::{
    HISTORY_SCHEMA_VERSION, History, HistoryChange, HistoryFilter, HistoryPoint, HistorySeries, Mark, build_history,
};
pub use history::html::{render_history_html, render_history_html_linked};
pub use history::load::{HistoryError, history_for};
pub use history::render::{render_history_json, render_history_table};
pub use junit::compare::render_compare_junit;
pub use junit::report::render_junit;
pub use model::build_report::build_report;
pub use model::curves::{BatteryCurve, battery_curves, sample_curves};
pub use model::input::{CampaignData, ReportError, load, load_head, load_stamped, pooled};
pub use model::pooled::pooled_models;
pub use model::report::{
    CampaignMeta, ComparisonKind, InvalidAttempt, MetricComparison, MetricRow, ModelReport, Report, SCHEMA_VERSION,
    StateRow, StatisticsMeta, VariantSummary, VariantVerdict,
};
pub use model::sequential::SequentialStop;
pub use model::summaries::summary_rows;
pub(crate) use model::verdicts::references;
pub use noise::build_noise::{
    Detectable, NOISE_POWERS, NOISE_SCHEMA_VERSION, NOISE_TRIALS, NoiseError, NoiseOptions, NoiseReport, NoiseSeries,
    NoiseWeek, build_noise, design_noise, noise_floor,
};
pub use noise::render::{render_noise_json, render_noise_table};
pub use render::csv_out::{RESULTS_CSV_HEADER, write_results_csv};
pub(crate) use render::html::esc;
pub use render::html::render_html;
pub use render::json::render_json;
pub use render::markdown::render_markdown;
pub use render::summary_csv::{SUMMARY_CSV_HEADER, write_summary_csv};
pub use render::table::render_table;
pub use stored_files::{WrittenFiles, write_campaign_files, write_report};
