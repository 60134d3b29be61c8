//! `TraceSession`: a Perfetto `android.power` trace recorded on the phone over one trial
//! (docs/platforms/android.md, "Perfetto during the soak").
//!
//! The phone records by itself (`perfetto --background`), so the trace covers the soak
//! even while a cut USB port keeps the lab from reaching the phone; the lab starts it at
//! launch, ends it after re-tether, reads the file back with `adb exec-out cat` (raw bytes
//! through the host's transport, SSH included) and deletes it. The config is the same text
//! on every version; how it reaches perfetto depends on the version (perfetto's Android
//! quickstart): SELinux lets perfetto read config files only from
//! /data/misc/perfetto-configs, which exists from Android 12 (SDK 31); before that the
//! config goes on stdin (`-c -`). `--txt` and the `android.power` data source came in
//! Android 10 (SDK 29), so older phones are refused.

use std::time::Duration;

use super::adb::{Adb, quote_argv};
use crate::clock::Clock;
use crate::collect::linux::proc_stat;
use crate::device::DeviceError;

/// The first SDK with `android.power` and `perfetto --txt` (Android 10).
pub const MIN_SDK: u32 = 29;
/// The first SDK whose perfetto may read a config file (from /data/misc/perfetto-configs).
pub const CONFIG_FILES_SDK: u32 = 31;
const TRACES: &str = "/data/misc/perfetto-traces";
const CONFIGS: &str = "/data/misc/perfetto-configs";
/// Battery counters and rails once every 5 s: an hour's soak is 720 samples (tens of KiB),
/// and a poll that finds the phone asleep waits for it instead of waking it.
const POLL_MS: u64 = 5_000;
/// How often perfetto drains its buffer into the file; the 4 MiB buffer holds far more
/// than a minute of these packets.
const WRITE_PERIOD_MS: u64 = 60_000;
/// A cap on the file, so a session nobody stops cannot fill the phone.
const MAX_FILE_BYTES: u64 = 64 << 20;
/// How long perfetto gets to write its last packets after SIGTERM.
const FLUSH: Duration = Duration::from_secs(10);
const POLL_EXIT: Duration = Duration::from_millis(250);
const CALL: Duration = Duration::from_secs(60);
/// Reading a trace of a long soak back over USB 2.
const PULL: Duration = Duration::from_secs(300);

/// How the config reaches perfetto on a phone's Android version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigDelivery {
    /// `echo CONFIG | perfetto -c - --txt` (Android 10 and 11).
    Stdin,
    /// A file in /data/misc/perfetto-configs, `perfetto --txt -c FILE` (Android 12 on).
    File,
}

/// A phone too old for the Perfetto the lab drives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`perfetto = true`, but the phone runs Android SDK {sdk}: Perfetto's `android.power` data source \
     and its text configs came in Android 10 (SDK {MIN_SDK}); fix: set `perfetto = false` in this \
     device's [device.android] in lab.toml, or use a phone on Android 10 or newer"
)]
pub struct SdkTooOld {
    pub sdk: u32,
}

impl ConfigDelivery {
    /// The form for SDK level `sdk`; older than Android 10 is an error saying why.
    pub fn for_sdk(sdk: u32) -> Result<ConfigDelivery, SdkTooOld> {
        match sdk {
            s if s < MIN_SDK => Err(SdkTooOld { sdk: s }),
            s if s < CONFIG_FILES_SDK => Ok(ConfigDelivery::Stdin),
            _ => Ok(ConfigDelivery::File),
        }
    }
}

/// The trace config (protobuf text format) for a trial of `duration`: battery counters and
/// power rails, written into the file as it goes. Only fields and enum names of the first
/// `AndroidPowerConfig` (Android 10) are used: perfetto's text parser refuses names it
/// does not know, so one text works on every version. `duration_ms` is the trial's length
/// plus a margin for untether, re-tether and a phone's reconnect: the lab ends the session
/// itself, and the duration only ends one that the lab never came back to.
pub fn trace_config(duration: Duration) -> String {
    let margin = Duration::from_secs(600) + duration / 10;
    let duration_ms = (duration + margin).as_millis();
    format!(
        "buffers {{\n  size_kb: 4096\n  fill_policy: RING_BUFFER\n}}\n\
         data_sources {{\n  config {{\n    name: \"android.power\"\n    android_power_config {{\n\
         \x20     battery_poll_ms: {POLL_MS}\n\
         \x20     battery_counters: BATTERY_COUNTER_CHARGE\n\
         \x20     battery_counters: BATTERY_COUNTER_CAPACITY_PERCENT\n\
         \x20     battery_counters: BATTERY_COUNTER_CURRENT\n\
         \x20     battery_counters: BATTERY_COUNTER_CURRENT_AVG\n\
         \x20     collect_power_rails: true\n    }}\n  }}\n}}\n\
         duration_ms: {duration_ms}\n\
         write_into_file: true\n\
         file_write_period_ms: {WRITE_PERIOD_MS}\n\
         max_file_size_bytes: {MAX_FILE_BYTES}\n"
    )
}

/// One trial's session on the phone.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSession {
    /// The background perfetto's pid.
    pub pid: u32,
    /// The trace on the phone.
    pub trace: String,
    /// The config file on the phone (Android 12 on).
    pub config: Option<String>,
    /// When it started, on the device clock (the battery curve's offset from launch).
    pub started_at: Duration,
}

impl TraceSession {
    /// The shell script that starts session `name` (unique per attempt) with `config`:
    /// its pid is what it prints.
    pub fn start_script(name: &str, delivery: ConfigDelivery, config: &str) -> (String, String, Option<String>) {
        let trace = format!("{TRACES}/{name}.pftrace");
        match delivery {
            ConfigDelivery::Stdin => {
                let script = format!(
                    "echo {} | {}",
                    quote_argv(&[config]),
                    quote_argv(&["perfetto", "--background", "--txt", "-c", "-", "-o", &trace])
                );
                (script, trace, None)
            }
            ConfigDelivery::File => {
                let file = format!("{CONFIGS}/{name}.pbtxt");
                let script = format!(
                    "echo {} > {} && {}",
                    quote_argv(&[config]),
                    quote_argv(&[&file]),
                    quote_argv(&["perfetto", "--background", "--txt", "-c", &file, "-o", &trace])
                );
                (script, trace, Some(file))
            }
        }
    }

    /// Starts session `name` with `config` ([`trace_config`]); `sdk` is the phone's SDK level.
    pub async fn start(adb: &Adb, clock: &Clock, name: &str, sdk: u32, config: &str) -> Result<Self, DeviceError> {
        let failed = |detail: String| failed(adb, "starting Perfetto", detail);
        let delivery = ConfigDelivery::for_sdk(sdk).map_err(|e| failed(e.to_string()))?;
        let (script, trace, config) = Self::start_script(name, delivery, config);
        let out = adb.script(&script, CALL).await?;
        let pid = out.stdout.lines().filter_map(|l| l.trim().parse::<u32>().ok()).next_back();
        match pid {
            Some(pid) if out.ok() => Ok(TraceSession { pid, trace, config, started_at: clock.now() }),
            _ => {
                if let Some(file) = &config {
                    // Best effort: the launch fails with perfetto's words either way.
                    let _ = adb.shell(&["rm", "-f", file], CALL).await;
                }
                let said = format!("{}{}", out.stderr, out.stdout);
                let said = said.trim().lines().last().unwrap_or("(no output)").to_string();
                // Android 10 phones other than Pixels ship with the tracing daemons off.
                let hint = if sdk < 30 {
                    "; fix: on Android 10 outside Pixels enable the tracing services first: \
                     `adb shell setprop persist.traced.enable 1`"
                } else {
                    ""
                };
                Err(failed(format!("perfetto --background exited {} without a pid: {said}{hint}", out.status)))
            }
        }
    }

    /// Whether the session's perfetto still runs (its pid may since be another program's).
    async fn running(&self, adb: &Adb) -> Result<bool, DeviceError> {
        let out = adb.shell(&["cat", &format!("/proc/{}/stat", self.pid)], CALL).await?;
        Ok(out.ok() && proc_stat::parse(&out.stdout).is_ok_and(|s| s.comm == "perfetto" && s.state != "Z"))
    }

    /// Ends the session if it still runs: SIGTERM makes perfetto write its last packets
    /// and close the file; one that is still there after [`FLUSH`] is killed.
    pub async fn end(&self, adb: &Adb, clock: &Clock) -> Result<(), DeviceError> {
        if !self.running(adb).await? {
            return Ok(());
        }
        let pid = self.pid.to_string();
        adb.shell(&["kill", &pid], CALL).await?;
        let deadline = clock.now() + FLUSH;
        while self.running(adb).await? {
            if clock.now() >= deadline {
                adb.shell(&["kill", "-9", &pid], CALL).await?;
                break;
            }
            clock.sleep(POLL_EXIT).await;
        }
        Ok(())
    }

    /// The trace's bytes, read whole (its size on the phone checks the copy).
    pub async fn pull(&self, adb: &Adb) -> Result<Vec<u8>, DeviceError> {
        let stat = adb.shell(&["stat", "-c", "%s", &self.trace], CALL).await?;
        let size: u64 = match stat.stdout.trim().parse() {
            Ok(n) if stat.ok() => n,
            _ => {
                let said = format!("{}{}", stat.stderr, stat.stdout);
                return Err(failed(
                    adb,
                    "reading the Perfetto trace",
                    format!("{} is not on the phone: {}", self.trace, said.trim()),
                ));
            }
        };
        let out = adb.run(&["exec-out", "cat", &self.trace], PULL).await?;
        if out.stdout.len() as u64 != size {
            // A copy cut short is a phone that dropped off: the runner waits and collects again.
            return Err(DeviceError::Disconnected {
                device: adb.device().to_string(),
                detail: format!("reading {}: {} of {size} bytes came", self.trace, out.stdout.len()),
            });
        }
        Ok(out.stdout)
    }

    /// Deletes the trace and the config file on the phone.
    pub async fn delete(&self, adb: &Adb) -> Result<(), DeviceError> {
        let mut argv = vec!["rm", "-f", self.trace.as_str()];
        argv.extend(self.config.as_deref());
        let out = adb.shell(&argv, CALL).await?;
        if !out.ok() {
            return Err(failed(
                adb,
                "deleting the Perfetto trace",
                format!("`{}`: {}", quote_argv(&argv), out.stderr.trim()),
            ));
        }
        Ok(())
    }
}

fn failed(adb: &Adb, what: &str, detail: String) -> DeviceError {
    DeviceError::Failed { device: adb.device().to_string(), what: what.into(), detail }
}

/// A session name unique per attempt, in the characters a file name on the phone may have:
/// the trial key and the attempt's seed.
pub fn session_name(trial_key: &str, seed: u64) -> String {
    let key: String = trial_key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(80)
        .collect();
    format!("lab-{key}-{seed:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_form_follows_the_android_version() {
        assert!(ConfigDelivery::for_sdk(28).unwrap_err().to_string().contains("Android SDK 28"));
        assert_eq!(ConfigDelivery::for_sdk(29), Ok(ConfigDelivery::Stdin));
        assert_eq!(ConfigDelivery::for_sdk(30), Ok(ConfigDelivery::Stdin));
        assert_eq!(ConfigDelivery::for_sdk(31), Ok(ConfigDelivery::File));
        assert_eq!(ConfigDelivery::for_sdk(35), Ok(ConfigDelivery::File));
    }

    #[test]
    fn the_config_asks_for_battery_counters_and_rails_past_the_soak() {
        let c = trace_config(Duration::from_secs(3600));
        for want in [
            "name: \"android.power\"",
            "collect_power_rails: true",
            "battery_counters: BATTERY_COUNTER_CHARGE",
            "battery_counters: BATTERY_COUNTER_CAPACITY_PERCENT",
            "write_into_file: true",
            // 1 h + 10 min + 6 min.
            "duration_ms: 4560000\n",
        ] {
            assert!(c.contains(want), "{want} missing from\n{c}");
        }
        // It goes into the phone's shell inside single quotes, through `echo`.
        assert!(!c.contains('\'') && !c.contains('\\'), "{c}");
    }

    #[test]
    fn before_android_12_the_config_goes_on_stdin_and_after_it_into_perfetto_configs() {
        let (script, trace, config) = TraceSession::start_script("lab-x", ConfigDelivery::Stdin, "duration_ms: 1");
        assert_eq!(
            script,
            "echo 'duration_ms: 1' | perfetto --background --txt -c - -o /data/misc/perfetto-traces/lab-x.pftrace"
        );
        assert_eq!((trace.as_str(), config), ("/data/misc/perfetto-traces/lab-x.pftrace", None));
        let (script, _, config) = TraceSession::start_script("lab-x", ConfigDelivery::File, "duration_ms: 1");
        assert_eq!(
            script,
            "echo 'duration_ms: 1' > /data/misc/perfetto-configs/lab-x.pbtxt && perfetto --background --txt \
             -c /data/misc/perfetto-configs/lab-x.pbtxt -o /data/misc/perfetto-traces/lab-x.pftrace"
        );
        assert_eq!(config.as_deref(), Some("/data/misc/perfetto-configs/lab-x.pbtxt"));
    }

    #[test]
    fn session_names_are_plain_file_names() {
        assert_eq!(session_name("0003-envoy+dns-1m-r2", 0xabc), "lab-0003-envoy_dns-1m-r2-0000000000000abc");
    }
}
