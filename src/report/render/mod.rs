//! The report's renderings: terminal table, Markdown, HTML with its SVG plots, JSON, and the
//! CSV files, with the number formatting they share.

pub(super) mod csv_out;
pub(super) mod float_text;
pub(super) mod format;
pub(super) mod html;
pub(super) mod json;
pub(super) mod markdown;
pub(super) mod metric_tables;
pub(super) mod plots;
pub(super) mod sample;
pub(super) mod summary_csv;
pub(super) mod table;
