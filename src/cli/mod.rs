//! The `lab` command line. The only part of the crate that prints.

mod app;
pub mod args;
mod campaign_run;
mod care_cmd;
mod changes_cmd;
mod compare_cmd;
mod comparison;
mod completions_cmd;
mod confirm_cmd;
pub mod context;
mod discover_cmd;
mod event_lines;
pub mod exit;
mod findings;
mod forward_cmd;
mod history_cmd;
mod hosts_cmd;
mod hubs_cmd;
pub mod import_cmd;
mod init_cmd;
pub mod lab_view;
mod listener;
mod man_cmd;
mod operator;
pub mod plan_cmd;
mod report_cmd;
pub mod reporter;
mod rerun_cmd;
mod run_cmd;
mod schedule_cmd;
mod serve;
pub mod status_cmd;
mod status_watch;
mod step_answer;
mod store_cmd;

pub use app::main;
