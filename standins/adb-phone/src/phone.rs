//! The phone model: everything a command can see or change, kept in ROOT/phone.json
//! (see `store.rs`). Time moves on by the wall clock: the battery charges or drains
//! between two commands, an app's CPU times grow while it runs, a trace ends on time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The launcher: what is in front when no app is.
pub const LAUNCHER: &str = "com.google.android.apps.nexuslauncher/.NexusLauncherActivity";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phone {
    pub props: BTreeMap<String, String>,
    pub settings: Settings,
    pub battery: Battery,
    /// Installed packages by name.
    pub packages: BTreeMap<String, Package>,
    /// Running processes by pid.
    pub processes: BTreeMap<u32, Process>,
    /// The component in front (`PKG/.Act`).
    pub resumed: String,
    /// Every `am start` that started something, oldest first.
    pub launches: Vec<Launch>,
    /// Open `install-create` sessions by id.
    pub sessions: BTreeMap<u32, Session>,
    /// `cmd thermalservice override-status N`.
    pub thermal_override: Option<u8>,
    /// Wall-clock milliseconds at boot (uptime, /proc starttime).
    pub boot_ms: u64,
    /// The time the state was last brought up to date.
    pub now_ms: u64,
    pub next_pid: u32,
    pub next_uid: u32,
    pub next_session: u32,
    /// What batterystats' history holds since its last reset.
    #[serde(default)]
    pub history: History,
}

/// The battery history batterystats keeps: BatteryService's reported status and plug
/// state at each change, from the last `--reset` on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct History {
    /// Wall-clock ms of the reset (0: never reset; the history starts at boot).
    pub reset_ms: u64,
    /// (ms, charging, plugged) at each change, oldest first.
    pub changes: Vec<(u64, bool, bool)>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub system: BTreeMap<String, String>,
    pub global: BTreeMap<String, String>,
    pub secure: BTreeMap<String, String>,
}

impl Settings {
    pub fn namespace(&mut self, name: &str) -> Option<&mut BTreeMap<String, String>> {
        match name {
            "system" => Some(&mut self.system),
            "global" => Some(&mut self.global),
            "secure" => Some(&mut self.secure),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Power {
    None,
    Usb,
    Ac,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Battery {
    /// The charger really attached (a tether or a test changes it; `dumpsys battery
    /// unplug` does not: it only changes what BatteryService reports).
    pub power: Power,
    pub charge_uah: f64,
    pub capacity_uah: f64,
    /// Current drawn while on battery, and put in while charging, in µA.
    pub discharge_ua: f64,
    pub charge_ua: f64,
    /// Tenths of a degree Celsius.
    pub temperature: i32,
    /// What BatteryService shows while its updates are stopped (`dumpsys battery
    /// unplug|set`): the values at that moment, edited by `set`, until `reset`.
    pub frozen: Option<Reported>,
    /// Charging input suspended (`setprop power.battery_input.suspended true`, on a
    /// userdebug build): the cable stays in, the battery discharges.
    #[serde(default)]
    pub input_suspended: bool,
}

/// What `dumpsys battery` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reported {
    pub ac: bool,
    pub usb: bool,
    pub wireless: bool,
    pub status: u8,
    pub level: u8,
    pub charge_counter: i64,
    pub voltage: i32,
    pub temperature: i32,
    pub present: bool,
}

pub const STATUS_CHARGING: u8 = 2;
pub const STATUS_DISCHARGING: u8 = 3;
pub const STATUS_FULL: u8 = 5;

impl Battery {
    pub fn level(&self) -> u8 {
        (self.charge_uah / self.capacity_uah * 100.0).round().clamp(0.0, 100.0) as u8
    }

    /// The health HAL's view, which BatteryService shows while updates run.
    pub fn live(&self) -> Reported {
        let level = self.level();
        let status = match self.power {
            Power::None => STATUS_DISCHARGING,
            _ if self.input_suspended => STATUS_DISCHARGING,
            _ if level >= 100 => STATUS_FULL,
            _ => STATUS_CHARGING,
        };
        Reported {
            ac: self.power == Power::Ac,
            usb: self.power == Power::Usb,
            wireless: false,
            status,
            level,
            charge_counter: self.charge_uah.round() as i64,
            // A Li-ion cell from about 3.5 V empty to 4.35 V full.
            voltage: 3500 + i32::from(level) * 85 / 10,
            temperature: self.temperature,
            present: true,
        }
    }

    pub fn reported(&self) -> Reported {
        self.frozen.clone().unwrap_or_else(|| self.live())
    }

    fn advance(&mut self, dt_ms: u64) {
        let hours = dt_ms as f64 / 3_600_000.0;
        match self.power {
            _ if self.input_suspended => self.charge_uah = (self.charge_uah - self.discharge_ua * hours).max(0.0),
            Power::None => self.charge_uah = (self.charge_uah - self.discharge_ua * hours).max(0.0),
            _ => self.charge_uah = (self.charge_uah + self.charge_ua * hours).min(self.capacity_uah),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    pub uid: u32,
    /// The install folder, `/data/app/~~…==/PKG-…==`.
    pub dir: String,
    /// APK file names in `dir`, base first.
    pub apks: Vec<String>,
    /// Share of one core the app uses while it runs (for /proc/PID/stat).
    pub cpu_share: f64,
    /// What `am start -W` reports as TotalTime for a cold start, in ms.
    pub cold_start_ms: u64,
    /// The total PSS `dumpsys meminfo` reports, in KiB.
    pub pss_kb: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "lowercase")]
pub enum Process {
    App {
        package: String,
        started_ms: u64,
    },
    /// A `perfetto --background` session writing `out` when killed or when `ends_ms` passes.
    Perfetto {
        out: String,
        started_ms: u64,
        ends_ms: Option<u64>,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    pub component: String,
    pub extras: BTreeMap<String, Extra>,
    pub at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "lowercase")]
pub enum Extra {
    String(String),
    Int(i32),
    Long(i64),
    Bool(bool),
    Float(f32),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// Written APKs: (name given to install-write, the bytes' file under ROOT/sessions).
    pub files: Vec<(String, String)>,
}

impl Phone {
    pub fn new(serial: &str, now_ms: u64) -> Phone {
        let props = [
            ("ro.product.name", "redfin"),
            ("ro.product.model", "Pixel 5"),
            ("ro.product.device", "redfin"),
            ("ro.product.brand", "google"),
            ("ro.product.manufacturer", "Google"),
            ("ro.build.version.release", "13"),
            ("ro.build.version.sdk", "33"),
            ("ro.build.id", "TQ3A.230805.001"),
            ("ro.build.fingerprint", "google/redfin/redfin:13/TQ3A.230805.001/10316531:user/release-keys"),
            ("ro.build.type", "user"),
            ("ro.product.cpu.abi", "arm64-v8a"),
            ("ro.serialno", serial),
            ("ro.boot.serialno", serial),
            ("sys.boot_completed", "1"),
        ];
        let map = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Phone {
            props: map(&props),
            settings: Settings {
                system: map(&[
                    ("screen_brightness", "102"),
                    ("screen_brightness_mode", "1"),
                    ("screen_off_timeout", "30000"),
                ]),
                global: map(&[
                    ("airplane_mode_on", "0"),
                    ("bluetooth_on", "1"),
                    ("wifi_on", "1"),
                    ("low_power", "0"),
                    ("stay_on_while_plugged_in", "0"),
                    ("adb_enabled", "1"),
                ]),
                secure: map(&[("location_mode", "3")]),
            },
            battery: Battery {
                power: Power::Usb,
                // A Pixel 5 holds 4080 mAh.
                capacity_uah: 4_080_000.0,
                charge_uah: 3_264_000.0,
                discharge_ua: 250_000.0,
                charge_ua: 500_000.0,
                temperature: 251,
                frozen: None,
                input_suspended: false,
            },
            packages: BTreeMap::new(),
            processes: BTreeMap::new(),
            resumed: LAUNCHER.to_string(),
            launches: Vec::new(),
            sessions: BTreeMap::new(),
            thermal_override: None,
            boot_ms: now_ms.saturating_sub(3_600_000),
            now_ms,
            next_pid: 12_000,
            next_uid: 10_211,
            next_session: 1_140_000_000,
            history: History::default(),
        }
    }

    /// Adds a history record when what BatteryService reports has changed (called after
    /// every command, and by `adb-phone power`).
    pub fn note_battery(&mut self) {
        let r = self.battery.reported();
        let now = (r.status == STATUS_CHARGING, r.ac || r.usb || r.wireless);
        if self.history.changes.last().is_none_or(|&(_, c, p)| (c, p) != now) {
            self.history.changes.push((self.now_ms, now.0, now.1));
        }
    }

    /// `dumpsys batterystats --reset`: the history starts again from now.
    pub fn reset_history(&mut self) {
        self.history = History { reset_ms: self.now_ms, changes: Vec::new() };
        self.note_battery();
    }

    /// Brings the model to `now_ms`; returns the traces that ended meanwhile (pid, file).
    pub fn advance(&mut self, now_ms: u64) -> Vec<(u32, String)> {
        let dt = now_ms.saturating_sub(self.now_ms);
        self.battery.advance(dt);
        self.now_ms = self.now_ms.max(now_ms);
        let ended: Vec<(u32, String)> = self
            .processes
            .iter()
            .filter_map(|(pid, p)| match p {
                Process::Perfetto { out, ends_ms: Some(end), .. } if *end <= self.now_ms => Some((*pid, out.clone())),
                _ => None,
            })
            .collect();
        for (pid, _) in &ended {
            self.processes.remove(pid);
        }
        ended
    }

    pub fn spawn(&mut self, p: Process) -> u32 {
        let pid = self.next_pid;
        self.next_pid += 1 + (pid % 7); // other processes start meanwhile
        self.processes.insert(pid, p);
        pid
    }

    pub fn pids_of(&self, name: &str) -> Vec<u32> {
        self.processes
            .iter()
            .filter(|(_, p)| match p {
                Process::App { package, .. } => package == name,
                Process::Perfetto { .. } => name == "perfetto",
            })
            .map(|(pid, _)| *pid)
            .collect()
    }

    /// `am force-stop`: its processes die, and the launcher comes to the front.
    pub fn stop_package(&mut self, name: &str) {
        self.processes.retain(|_, p| !matches!(p, Process::App { package, .. } if package == name));
        if self.resumed.split('/').next() == Some(name) {
            self.resumed = LAUNCHER.to_string();
        }
    }

    pub fn setting(&self, namespace: &str, key: &str) -> Option<&String> {
        match namespace {
            "system" => self.settings.system.get(key),
            "global" => self.settings.global.get(key),
            "secure" => self.settings.secure.get(key),
            _ => None,
        }
    }

    pub fn enabled(&self, global_key: &str) -> bool {
        self.setting("global", global_key).is_some_and(|v| v == "1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unplugged_the_charge_counter_falls_at_the_set_current() {
        let mut p = Phone::new("S", 0);
        p.battery.power = Power::None;
        let before = p.battery.live();
        p.advance(36_000); // 250 mA for 36 s is 2.5 mAh
        let after = p.battery.live();
        assert_eq!(before.status, STATUS_DISCHARGING);
        assert_eq!(before.charge_counter - after.charge_counter, 2_500);
    }

    #[test]
    fn the_history_records_changes_of_the_reported_state_only() {
        let mut p = Phone::new("S", 1_000);
        p.reset_history();
        p.note_battery();
        p.advance(5_000);
        p.battery.input_suspended = true;
        p.note_battery();
        p.advance(9_000);
        p.battery.frozen = Some(p.battery.live());
        p.battery.power = Power::None;
        p.note_battery();
        assert_eq!(p.history.reset_ms, 1_000);
        assert_eq!(p.history.changes, [(1_000, true, true), (5_000, false, true)], "a frozen state is what it shows");
    }

    #[test]
    fn a_frozen_battery_reports_what_it_had_when_frozen() {
        let mut p = Phone::new("S", 0);
        p.battery.frozen = Some(p.battery.live());
        p.battery.power = Power::None;
        p.advance(3_600_000);
        assert_eq!(p.battery.reported().status, STATUS_CHARGING);
        assert_eq!(p.battery.live().status, STATUS_DISCHARGING);
    }
}
