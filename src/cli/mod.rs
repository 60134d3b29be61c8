//! The `lab` command line. The only part of the crate that prints.

mod app;
pub mod args;
mod care_cmd;
mod changes_cmd;
mod compare_cmd;
mod completions_cmd;
pub(crate) mod confirm_cmd;
pub mod context;
mod discover_cmd;
mod event_lines;
pub mod exit;
mod forward_cmd;
mod history_cmd;
mod hosts_cmd;
mod hubs_cmd;
pub mod import_cmd;
mod init_cmd;
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
pub mod status_care;
pub mod status_cmd;
mod status_operator;
mod status_queue;
mod status_watch;
mod store_cmd;

pub use app::main;
