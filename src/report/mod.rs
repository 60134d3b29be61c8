//! Reports: tables, Markdown, HTML, CSV, JSON and JUnit XML from a campaign in the store.

mod build;
mod compare;
mod compare_render;
mod csv_out;
mod curves;
mod files;
mod float_text;
mod format;
mod history;
mod history_html;
mod history_load;
mod history_render;
mod html;
mod input;
mod json;
mod junit;
mod junit_compare;
mod junit_xml;
mod markdown;
mod metric_tables;
mod model;
mod plots;
mod pooled;
mod sample;
mod state_rows;
mod summaries;
mod summary_csv;
mod table;
mod verdicts;

pub use build::build_report;
pub use compare::{
    COMPARE_SCHEMA_VERSION, CampaignRef, CompareModel, CompareReport, CompareRow, compare_models, compare_reports,
    compare_summaries,
};
pub use compare_render::{render_compare_json, render_compare_markdown, render_compare_table};
pub use csv_out::{RESULTS_CSV_HEADER, write_results_csv};
pub use curves::{BatteryCurve, battery_curves, sample_curves};
pub use files::{ReportFiles, files_current, write_all, write_all_with, write_stamp};
pub use history::{
    HISTORY_SCHEMA_VERSION, History, HistoryChange, HistoryFilter, HistoryPoint, HistorySeries, Mark, build_history,
};
pub use history_html::render_history_html;
pub use history_load::{HistoryError, history_for};
pub use history_render::{render_history_json, render_history_table};
pub use html::render_html;
pub use input::{CampaignData, ReportError, load, load_head, load_stamped};
pub use json::render_json;
pub use junit::render_junit;
pub use junit_compare::render_compare_junit;
pub use markdown::render_markdown;
pub use model::{
    CampaignMeta, ComparisonKind, InvalidAttempt, MetricComparison, MetricRow, ModelReport, Report, SCHEMA_VERSION,
    StateRow, StatisticsMeta, VariantSummary, VariantVerdict,
};
pub use pooled::pooled_models;
pub use summaries::summary_rows;
pub use summary_csv::{SUMMARY_CSV_HEADER, write_summary_csv};
pub use table::render_table;
