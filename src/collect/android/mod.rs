//! Parsers of what Android (`adb shell` and `dumpsys` outputs, Perfetto traces) give back.

pub mod adb_devices;
pub mod battery;
pub mod batterystats_checkin;
pub mod batterystats_history;
pub mod bluetooth;
pub mod cpuinfo;
pub mod dumpsys_wifi;
pub mod history_text;
pub mod meminfo;
pub mod perfetto;
pub mod protobuf;
pub mod settings;
pub mod thermal;
pub mod wifi_status;
