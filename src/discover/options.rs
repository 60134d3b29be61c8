//! Where `lab discover` looks besides each tool's default.

use std::time::Duration;

use crate::config::{AdbServer, UsbmuxdAddress};

#[derive(Debug, Clone)]
pub struct DiscoverOptions {
    /// `adb -H -P` on every host (default: adb's own server).
    pub adb_server: Option<AdbServer>,
    /// usbmuxd on every host (default: `/var/run/usbmuxd`).
    pub usbmuxd: Option<UsbmuxdAddress>,
    /// An Otii server to ask on every host (default: `127.0.0.1:1905`).
    pub otii: Option<(String, u16)>,
    /// Each call's limit: a hung tool is reported, not waited for.
    pub limit: Duration,
}

impl Default for DiscoverOptions {
    fn default() -> Self {
        DiscoverOptions { adb_server: None, usbmuxd: None, otii: None, limit: Duration::from_secs(10) }
    }
}
