//! The traffic endpoint: counts what the app under test really sent, per trial, and
//! keeps what the app reported about its device.

mod app_report;
mod app_report_error;
mod counts;
mod report_board;
mod server;

pub use app_report::{AppReport, BatteryState, CONTRACT_VERSION, ReportAt, ThermalState};
pub use app_report_error::AppReportError;
pub use counts::{TokenCounts, TrafficCount, is_state_path, token_of};
pub use report_board::ReportBoard;
pub use server::{Endpoint, EndpointError};
