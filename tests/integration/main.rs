//! lab's integration tests, one binary (as `just` has them): each module is an area that
//! drives the real `lab` binary, the library, or a stand-in; linking the library with its
//! vendored OpenSSL, bundled SQLite and idevice once instead of once per file is most of
//! what building the tests costs. `cargo test --test integration cli_run::` runs one area.
//!
//! Helpers shared with the benches live in tests/common/, fixtures in tests/fixtures/, and
//! insta's snapshots in tests/integration/snapshots/ (`integration__<module>__<name>.snap`).

#[path = "../common/mod.rs"]
mod common;

mod aa_false_positive;
mod adb_standin;
mod agent_ops;
mod agents;
mod android_campaign;
mod android_perfetto;
mod app_state;
mod artifacts_s3;
mod care;
mod care_android;
mod cli_bad_input;
mod cli_changes;
mod cli_completions;
mod cli_discover;
mod cli_event_stream;
mod cli_faults;
mod cli_history;
mod cli_hosts;
mod cli_hubs;
mod cli_import;
mod cli_junit;
mod cli_noise;
mod cli_offline;
mod cli_plan_status;
mod cli_power_cut;
mod cli_rerun;
mod cli_resume;
mod cli_run;
mod cli_schedule;
mod cli_status_watch;
mod cli_verdicts;
mod config_errors;
mod config_load;
mod crosscheck;
mod endpoint_load;
mod host_audit;
mod host_trials;
mod html_screenshot;
mod hub_fixtures;
mod hub_untether;
mod ios17_campaign;
mod ios_campaign;
mod ios_samples;
mod ios_standin_lab;
mod ios_usbmuxd;
mod iphone17_standin;
mod iphone_standin;
mod monsoon_campaign;
mod operator_steps;
mod otii_campaign;
mod otii_standin;
mod parsers_fixtures;
mod parsers_fuzz;
mod perfetto_fixtures;
mod powerlog;
mod remote_host;
mod remote_tether;
mod runner_launch;
mod runner_time;
mod schedule_regression;
mod sequential_campaign;
mod serve;
mod serve_abuse;
mod serve_browser;
mod serve_submit;
mod shared_lab;
mod shared_lab_postgres;
mod sim_monitor;
mod sized_design;
mod ssh_forward;
mod ssh_transport;
mod uhubctl_standin;
