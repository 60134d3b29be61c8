//! Parsers of device outputs: pure functions of text and bytes that return typed values
//! with units and never panic; every problem is a [`ParseError`] naming the line.
//!
//! [`metrics_map`] turns parsed values into the lab's measurements, and [`import`] and
//! [`attach`] are what `lab import` runs.

pub mod android_battery;
pub mod attach;
pub mod batterystats_checkin;
pub mod batterystats_history;
pub mod bluetooth;
pub mod cpuinfo;
pub mod dumpsys_wifi;
pub mod history_text;
pub mod import;
pub mod ios_battery;
pub mod meminfo;
pub mod metrics_map;
mod parse_error;
pub mod perfetto;
pub mod power_supply;
pub mod powerlog;
pub mod proc_stat;
pub mod procfs;
pub mod protobuf;
pub mod settings;
pub mod sim_dump;
pub mod sysdiagnose;
mod text;
pub mod thermal;
pub mod uhubctl;
pub mod wifi_status;

pub use parse_error::ParseError;
