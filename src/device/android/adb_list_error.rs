//! `AdbListError`: why `adb devices -l` listed no phones on a host, with the fix.

use std::time::Duration;

use crate::transport::TransportError;

#[derive(Debug, thiserror::Error)]
pub enum AdbListError {
    #[error("adb is not installed on {host}; fix: `apt-get install adb` there (or the SDK's platform-tools)")]
    NotInstalled { host: String },
    #[error(
        "`{command}` did not answer within {}; fix: restart the adb server there (`adb kill-server`)",
        humantime::format_duration(*timeout)
    )]
    Hung { command: String, timeout: Duration },
    #[error(transparent)]
    Transport(TransportError),
    /// `said`: adb's first line on stderr.
    #[error("`{command}` exited {status:?}: {said}")]
    Exited { command: String, status: Option<i32>, said: String },
}
