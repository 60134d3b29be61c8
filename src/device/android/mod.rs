//! Android phones through the real `adb` client and server (docs/platforms/android.md).

mod adb;
mod adb_list_error;
mod device;
mod listing;
mod perfetto;

pub use adb::{Adb, Connection, ShellOutput, offline_fix, quote_argv, unauthorized_fix};
pub use adb_list_error::AdbListError;
pub use device::{AndroidDevice, brightness_pct, resumed_package};
pub use listing::{AndroidProps, list_attached, read_props};
pub use perfetto::{ConfigDelivery, SdkTooOld, TraceSession, session_name, trace_config};
