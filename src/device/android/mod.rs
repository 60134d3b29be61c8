//! Android phones through the real `adb` client and server (docs/platforms/android.md).

mod adb;

pub use adb::{Adb, Connection, ShellOutput, quote_argv, unauthorized_fix};
