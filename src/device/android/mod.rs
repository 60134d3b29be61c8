//! Android phones through the real `adb` client and server (docs/platforms/android.md).

mod adb;
mod device;

pub use adb::{Adb, Connection, ShellOutput, quote_argv, unauthorized_fix};
pub use device::{AndroidDevice, brightness_pct, resumed_package};
