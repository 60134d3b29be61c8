//! `Adb`: the real `adb` client, run through the device's host transport.
//!
//! Every call is an argv (`adb [-H HOST -P PORT] -s SERIAL …`), bounded by a time limit.
//! Shell commands are built from device-side argv with every piece single-quoted, so no
//! config string becomes shell syntax on the phone either. `adb shell` exits 0 when the
//! connection drops mid-command (AOSP's client starts from exit code 0), so every shell
//! command ends with a sentinel that echoes its exit status: a missing sentinel is a lost
//! device.

use std::sync::Arc;
use std::time::Duration;

use crate::config::AdbServer;
use crate::device::DeviceError;
use crate::transport::{CommandOutput, CommandSpec, Transport, TransportError, shell_quote};

/// What the phone's shell prints last: the command's exit status.
const SENTINEL: &str = "__lab_exit=";
/// Separates the parts of a batched read.
const MARK: &str = "@@lab-part@@";

/// How `adb get-state` sees the phone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    Device,
    /// The phone has not accepted this host's RSA key.
    Unauthorized,
    Offline,
    /// The server does not know the serial (unplugged, or never connected).
    Missing(String),
}

/// A shell command's result on the phone.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellOutput {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl ShellOutput {
    pub fn ok(&self) -> bool {
        self.status == 0
    }
}

pub struct Adb {
    transport: Arc<dyn Transport>,
    device: String,
    serial: String,
    /// `-H HOST -P PORT`, when the device uses an adb server other than the default.
    server: Vec<String>,
}

impl Adb {
    pub fn new(transport: Arc<dyn Transport>, device: &str, serial: &str, server: Option<&AdbServer>) -> Adb {
        let server =
            server.map(|s| vec!["-H".into(), s.host.clone(), "-P".into(), s.port.to_string()]).unwrap_or_default();
        Adb { transport, device: device.into(), serial: serial.into(), server }
    }

    pub fn serial(&self) -> &str {
        &self.serial
    }

    /// The lab's name of the device (for errors).
    pub fn device(&self) -> &str {
        &self.device
    }

    /// `adb [server] -s SERIAL ARGS…` as a command spec.
    pub fn command(&self, args: &[&str], timeout: Duration) -> CommandSpec {
        let mut c = CommandSpec::new("adb", &[]);
        c.args.extend(self.server.iter().cloned());
        c.args.extend(["-s".to_string(), self.serial.clone()]);
        c.args.extend(args.iter().map(|a| a.to_string()));
        c.timeout = timeout;
        c
    }

    fn lost(&self, detail: impl Into<String>) -> DeviceError {
        DeviceError::Disconnected { device: self.device.clone(), detail: detail.into() }
    }

    fn failed(&self, what: &str, detail: impl Into<String>) -> DeviceError {
        DeviceError::Failed { device: self.device.clone(), what: what.into(), detail: detail.into() }
    }

    /// Runs adb with `args`; an error of the host (unreachable) or of adb's own that says the
    /// phone is gone is a disconnect, anything else is returned as it came.
    pub async fn run(&self, args: &[&str], timeout: Duration) -> Result<CommandOutput, DeviceError> {
        let out = self.run_raw(args, timeout).await?;
        if !out.success() {
            self.check_gone(&out.stderr_text())?;
        }
        Ok(out)
    }

    /// adb's own words for a phone that is not there, as errors.
    fn check_gone(&self, stderr: &str) -> Result<(), DeviceError> {
        let s = stderr.trim();
        if s.contains("unauthorized") {
            return Err(self.failed("connecting", unauthorized_fix(&self.serial)));
        }
        let gone =
            ["not found", "offline", "no devices", "device still connecting", "closed", "cannot connect to daemon"];
        if s.starts_with("error:") && gone.iter().any(|g| s.contains(g)) || s.contains("cannot connect to daemon") {
            return Err(self.lost(format!("adb: {}", first_line(s))));
        }
        Ok(())
    }

    /// How the adb server sees the phone now.
    pub async fn connection(&self, timeout: Duration) -> Result<Connection, DeviceError> {
        let out = self.run_raw(&["get-state"], timeout).await?;
        let text = format!("{}{}", out.stdout_text(), out.stderr_text());
        Ok(match out.stdout_text().trim() {
            "device" | "recovery" | "sideload" | "bootloader" => Connection::Device,
            _ if text.contains("unauthorized") => Connection::Unauthorized,
            _ if text.contains("offline") => Connection::Offline,
            _ => Connection::Missing(first_line(text.trim()).to_string()),
        })
    }

    /// Like `run`, but adb's "not found" / "unauthorized" come back as output (for `connection`).
    async fn run_raw(&self, args: &[&str], timeout: Duration) -> Result<CommandOutput, DeviceError> {
        let cmd = self.command(args, timeout);
        self.transport.exec(&cmd).await.map_err(|e| match e {
            TransportError::Spawn { .. } => self.failed(
                "running adb",
                format!("{e} (Debian: apt-get install adb; elsewhere the SDK's platform-tools)"),
            ),
            e => DeviceError::from_transport(&self.device, &format!("`{}`", cmd.display()), e),
        })
    }

    /// The features the phone's adbd advertises (`shell_v2`, `cmd`, …).
    pub async fn features(&self, timeout: Duration) -> Result<Vec<String>, DeviceError> {
        let out = self.run(&["features"], timeout).await?;
        if !out.success() {
            return Err(self.failed("reading adb features", first_line(out.stderr_text().trim()).to_string()));
        }
        Ok(out.stdout_text().split([',', '\n']).map(str::trim).filter(|f| !f.is_empty()).map(String::from).collect())
    }

    /// Runs `argv` in the phone's shell (each piece quoted) and returns its exit status and output.
    pub async fn shell(&self, argv: &[&str], timeout: Duration) -> Result<ShellOutput, DeviceError> {
        self.script(&quote_argv(argv), timeout).await
    }

    /// Runs a shell script on the phone; the caller has quoted every value in it.
    pub async fn script(&self, script: &str, timeout: Duration) -> Result<ShellOutput, DeviceError> {
        let line = format!("{script}; echo \"{SENTINEL}$?\"");
        let out = self.run(&["shell", &line], timeout).await?;
        let text = out.stdout_text();
        match split_sentinel(&text) {
            Some((stdout, status)) => Ok(ShellOutput { status, stdout, stderr: out.stderr_text() }),
            None => Err(self.lost(format!(
                "the connection dropped during `adb shell {}` (no exit status came back){}",
                first_line(script),
                if out.stderr.is_empty() {
                    String::new()
                } else {
                    format!(": {}", first_line(out.stderr_text().trim()))
                }
            ))),
        }
    }

    /// Runs several shell commands (each quoted by the caller) in one shell call; their
    /// outputs in order. An answer without every part's end is a lost phone.
    pub async fn batch(&self, commands: &[String], timeout: Duration) -> Result<Vec<String>, DeviceError> {
        let script = commands.iter().map(|c| format!("{c}; echo {MARK}")).collect::<Vec<_>>().join("; ");
        let out = self.script(&script, timeout).await?;
        let mut parts: Vec<String> = out.stdout.split(MARK).map(|p| p.trim_matches('\n').to_string()).collect();
        if parts.len() <= commands.len() {
            return Err(self.lost("the phone's answer was cut short"));
        }
        parts.truncate(commands.len());
        Ok(parts)
    }

    /// Waits until the phone is back (`adb wait-for-device`), up to `timeout`.
    pub async fn wait_for_device(&self, timeout: Duration) -> Result<(), DeviceError> {
        match self.run_raw(&["wait-for-device"], timeout).await {
            Ok(out) if out.success() => Ok(()),
            Ok(out) => Err(self.lost(format!("adb wait-for-device: {}", first_line(out.stderr_text().trim())))),
            Err(e) => Err(self.lost(format!("not back within {}: {e}", humantime::format_duration(timeout)))),
        }
    }
}

/// The fix for a phone that has not accepted this host's key.
pub fn unauthorized_fix(serial: &str) -> String {
    format!(
        "phone {serial} is unauthorized: it has not accepted this host's adb key; fix: unlock the phone and accept \
         \"Allow USB debugging?\" (tick \"Always allow from this computer\"), then check with `adb devices`"
    )
}

/// The fix for a phone adb sees as offline.
pub fn offline_fix(serial: &str) -> String {
    format!("phone {serial} is offline to adb; fix: unplug and replug it, or `adb reconnect offline` on its host")
}

/// `argv` as one shell command line with every piece quoted.
pub fn quote_argv(argv: &[&str]) -> String {
    argv.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ")
}

/// Splits the sentinel line off a shell's output: (output before it, exit status).
fn split_sentinel(text: &str) -> Option<(String, i32)> {
    let at = text.rfind(SENTINEL)?;
    let rest = &text[at + SENTINEL.len()..];
    let (line, after) = rest.split_once('\n').unwrap_or((rest, ""));
    let status = line.trim().parse().ok()?;
    // The sentinel starts its own line unless the command's output did not end with one.
    // A shell without shell_v2 mixes stderr into the output, and it may come after the
    // sentinel: it is kept as output.
    Some((format!("{}{after}", &text[..at]), status))
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Reply, ScriptedTransport};

    fn adb(t: &Arc<ScriptedTransport>) -> Adb {
        let server = AdbServer { host: "127.0.0.1".into(), port: 15037 };
        Adb::new(t.clone(), "pixel-1", "0A1B", Some(&server))
    }

    #[tokio::test]
    async fn a_shell_command_is_quoted_and_its_status_read_from_the_sentinel() {
        let t = Arc::new(ScriptedTransport::new("local"));
        t.on(&["adb"], vec![Reply::ok("Pixel 5\n__lab_exit=0\n")]);
        let out = adb(&t).shell(&["getprop", "ro.product.model; rm -rf /"], Duration::from_secs(5)).await.unwrap();
        assert_eq!((out.status, out.stdout.as_str()), (0, "Pixel 5\n"));
        let call = &t.calls()[0];
        assert_eq!(call[..6], ["adb", "-H", "127.0.0.1", "-P", "15037", "-s"]);
        assert_eq!(call[6..8], ["0A1B", "shell"]);
        assert_eq!(call[8], "getprop 'ro.product.model; rm -rf /'; echo \"__lab_exit=$?\"");
    }

    #[tokio::test]
    async fn a_missing_sentinel_is_a_lost_phone_and_adbs_words_are_read() {
        let t = Arc::new(ScriptedTransport::new("local"));
        // adb exits 0 after the connection dropped: only part of the output came.
        t.on(
            &["adb", "-H", "127.0.0.1", "-P", "15037", "-s", "0A1B", "shell"],
            vec![
                Reply::ok("level: 8"),
                Reply::fail(1, "error: device '0A1B' not found\n"),
                Reply::fail(1, "error: device unauthorized.\nThis adb server's $ADB_VENDOR_KEYS is not set\n"),
            ],
        );
        let a = adb(&t);
        let e = a.shell(&["dumpsys", "battery"], Duration::from_secs(5)).await.unwrap_err();
        assert!(e.is_disconnect() && e.to_string().contains("no exit status came back"), "{e}");
        let e = a.shell(&["dumpsys", "battery"], Duration::from_secs(5)).await.unwrap_err();
        assert!(e.is_disconnect() && e.to_string().contains("not found"), "{e}");
        let e = a.shell(&["dumpsys", "battery"], Duration::from_secs(5)).await.unwrap_err();
        assert!(!e.is_disconnect() && e.to_string().contains("Allow USB debugging"), "{e}");
    }

    #[tokio::test]
    async fn get_state_tells_a_device_from_an_unauthorized_or_missing_one() {
        let t = Arc::new(ScriptedTransport::new("local"));
        t.on(
            &["adb"],
            vec![
                Reply::ok("device\n"),
                Reply::fail(1, "error: device unauthorized.\n"),
                Reply::fail(1, "error: device offline\n"),
                Reply::fail(1, "error: device '0A1B' not found\n"),
            ],
        );
        let a = adb(&t);
        let d = Duration::from_secs(5);
        assert_eq!(a.connection(d).await.unwrap(), Connection::Device);
        assert_eq!(a.connection(d).await.unwrap(), Connection::Unauthorized);
        assert_eq!(a.connection(d).await.unwrap(), Connection::Offline);
        assert!(matches!(a.connection(d).await.unwrap(), Connection::Missing(m) if m.contains("not found")));
    }

    #[test]
    fn the_sentinel_is_split_off_the_output() {
        assert_eq!(split_sentinel("a\nb\n__lab_exit=3\n"), Some(("a\nb\n".to_string(), 3)));
        assert_eq!(split_sentinel("no newline__lab_exit=0"), Some(("no newline".to_string(), 0)));
        assert_eq!(split_sentinel("__lab_exit=1\nFailed to set\n"), Some(("Failed to set\n".to_string(), 1)));
        assert_eq!(split_sentinel("cut short __lab_exit="), None);
        assert_eq!(split_sentinel("cut off mid-line"), None);
        assert_eq!(split_sentinel("__lab_exit="), None);
    }
}
