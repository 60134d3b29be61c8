//! Android phones through the real `adb` client and server (docs/platforms/android.md).

mod adb;
mod device;
mod perfetto;

pub use adb::{Adb, Connection, ShellOutput, quote_argv, unauthorized_fix};
pub use device::{AndroidDevice, brightness_pct, resumed_package};
pub use perfetto::{ConfigDelivery, TraceSession, session_name, trace_config};
