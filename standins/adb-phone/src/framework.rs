//! Android's system commands: `dumpsys`, `settings`, `cmd` (wifi, bluetooth_manager,
//! thermalservice; package and activity are in `packages.rs`), `svc`, `getprop`, `pidof`,
//! `perfetto`, and `/proc/PID/stat`. Outputs have the layout AOSP prints; where a real
//! capture exists it is served from tests/fixtures/devices/android/ (see SOURCES.md).

use crate::commands::Io;
use crate::packages;
use crate::phone::{Phone, Process, Reported};
use crate::store::Store;

const WIFI_STATUS: &str = include_str!("../../../tests/fixtures/devices/android/wifi_status_tradefed.txt");
const CHECKIN: &str = include_str!("../../../tests/fixtures/devices/android/batterystats_checkin_v36_perfetto.txt");
const HISTORY: &str =
    include_str!("../../../tests/fixtures/devices/android/batterystats_history_text_loganalysis_nodischarge.txt");
const DUMPSYS_WIFI: &str =
    include_str!("../../../tests/fixtures/devices/android/dumpsys_wifi_loganalysis_noevents.txt");

/// Zygote64's pid: the parent of every app.
const ZYGOTE: u32 = 695;

/// Runs command `name` if it is one of these; `None` if not.
pub fn run(store: &Store, name: &str, args: &[String], io: &mut Io) -> Option<i32> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let status = match name {
        "getprop" => on_phone(store, io, |p, io| getprop(p, &args, io)),
        "setprop" => on_phone(store, io, |p, io| setprop(p, &args, io)),
        "settings" => on_phone(store, io, |p, io| settings(p, &args, io)),
        "svc" => on_phone(store, io, |p, io| svc(p, &args, io)),
        "pidof" => on_phone(store, io, |p, io| pidof(p, &args, io)),
        "dumpsys" => on_phone(store, io, |p, io| dumpsys(p, &args, io)),
        "cmd" => cmd(store, &args, io),
        "perfetto" => perfetto(store, &args, io),
        _ => return None,
    };
    Some(status)
}

/// Runs `f` on the phone between loading and saving it.
pub fn on_phone(store: &Store, io: &mut Io, f: impl FnOnce(&mut Phone, &mut Io) -> i32) -> i32 {
    match store.update(|p| f(p, io)) {
        Ok(status) => status,
        Err(e) => {
            io.warn(format!("/system/bin/sh: the phone's state: {e}"));
            1
        }
    }
}

/// What a Java shell command prints when it throws (`cmd`'s "Exception occurred…").
fn exception(io: &mut Io, verb: &str, exception: &str) -> i32 {
    io.warn(format!("Exception occurred while executing '{verb}':"));
    io.warn(exception);
    255
}

fn getprop(p: &Phone, args: &[&str], io: &mut Io) -> i32 {
    match args {
        [] => {
            for (k, v) in &p.props {
                io.say(format!("[{k}]: [{v}]"));
            }
        }
        [key, rest @ ..] => {
            let default = rest.first().copied().unwrap_or("");
            io.say(p.props.get(*key).map_or(default, String::as_str));
        }
    }
    0
}

/// `setprop KEY VALUE` as the shell user may: never `ro.*`; `power.*` only on a
/// userdebug build (its shell runs as root). `power.battery_input.suspended` suspends
/// the charging input, as the Pixel health HAL does.
fn setprop(p: &mut Phone, args: &[&str], io: &mut Io) -> i32 {
    let [key, value] = args else {
        io.warn("usage: setprop NAME VALUE");
        return 1;
    };
    let userdebug = p.props.get("ro.build.type").is_some_and(|t| t == "userdebug");
    if key.starts_with("ro.") || key.starts_with("power.") && !userdebug {
        io.warn(format!("Failed to set property '{key}' to '{value}'.\nSee dmesg for error reason."));
        return 1;
    }
    if *key == "power.battery_input.suspended" {
        p.battery.input_suspended = *value == "true" || *value == "1";
    }
    p.props.insert(key.to_string(), value.to_string());
    0
}

/// SettingsProvider's validators for the keys the lab sets (others take any string).
fn invalid_setting(key: &str, value: &str) -> bool {
    let range = match key {
        "screen_brightness" => 0..=255,
        "screen_brightness_mode" => 0..=1,
        _ => return false,
    };
    !value.parse::<i64>().is_ok_and(|v| range.contains(&v))
}

fn settings(p: &mut Phone, args: &[&str], io: &mut Io) -> i32 {
    // `--user N` may come first; there is one user.
    let args = match args {
        ["--user", _, rest @ ..] => rest,
        _ => args,
    };
    let (verb, ns, rest) = match args {
        [verb, ns, rest @ ..] => (*verb, *ns, rest),
        _ => {
            io.warn("usage:  settings [--user <USER_ID> | current] get namespace key");
            return 1;
        }
    };
    let Some(table) = p.settings.namespace(ns) else {
        io.warn(format!("Invalid namespace '{ns}'"));
        return 255;
    };
    match (verb, rest) {
        ("get", [key]) => io.say(table.get(*key).map_or("null", String::as_str)),
        ("put", [key, value, ..]) => {
            if ns == "system" && invalid_setting(key, value) {
                return exception(
                    io,
                    "put",
                    &format!("java.lang.IllegalArgumentException: Invalid value: {value} for setting: {key}"),
                );
            }
            table.insert(key.to_string(), value.to_string());
        }
        ("delete", [key]) => io.say(format!("Deleted {} rows", usize::from(table.remove(*key).is_some()))),
        ("list", []) => {
            for (k, v) in table.iter() {
                io.say(format!("{k}={v}"));
            }
        }
        _ => {
            io.warn(format!("Invalid command: {verb}"));
            return 255;
        }
    }
    0
}

fn set_global(p: &mut Phone, key: &str, on: bool) {
    p.settings.global.insert(key.to_string(), if on { "1" } else { "0" }.to_string());
}

fn svc(p: &mut Phone, args: &[&str], io: &mut Io) -> i32 {
    match args {
        ["wifi", "enable"] | ["wifi", "disable"] => set_global(p, "wifi_on", args[1] == "enable"),
        ["bluetooth", "enable"] | ["bluetooth", "disable"] => set_global(p, "bluetooth_on", args[1] == "enable"),
        ["power", "stayon", how] => {
            // BatteryManager.BATTERY_PLUGGED_* bits.
            let bits = match *how {
                "true" => 7,
                "false" => 0,
                "ac" => 1,
                "usb" => 2,
                "wireless" => 4,
                _ => {
                    io.warn("usage: svc power stayon [true|false|usb|ac|wireless]");
                    return 1;
                }
            };
            p.settings.global.insert("stay_on_while_plugged_in".into(), bits.to_string());
        }
        _ => {
            io.warn("Available commands:\n    help\n    power\n    data\n    wifi\n    usb\n    nfc\n    bluetooth");
            return 1;
        }
    }
    0
}

fn pidof(p: &Phone, args: &[&str], io: &mut Io) -> i32 {
    let pids: Vec<String> = args.iter().flat_map(|name| p.pids_of(name)).map(|pid| pid.to_string()).collect();
    if pids.is_empty() {
        return 1;
    }
    io.say(pids.join(" "));
    0
}

fn cmd(store: &Store, args: &[&str], io: &mut Io) -> i32 {
    let (service, rest) = match args {
        [service, rest @ ..] => (*service, rest),
        [] => {
            io.warn("cmd: No service specified; use -l to list all running services. Use -w to start and wait for a service.");
            return 20;
        }
    };
    match service {
        "package" => packages::pm(store, rest, io),
        "activity" => packages::am(store, rest, io),
        "wifi" => on_phone(store, io, |p, io| cmd_wifi(p, rest, io)),
        "bluetooth_manager" => on_phone(store, io, |p, io| match rest {
            ["enable"] | ["disable"] => {
                set_global(p, "bluetooth_on", rest[0] == "enable");
                0
            }
            _ => {
                io.warn("Bluetooth Manager Commands:\n  enable\n  disable");
                255
            }
        }),
        "thermalservice" => on_phone(store, io, |p, io| match rest {
            ["override-status", n] if n.parse::<u8>().is_ok_and(|n| n <= 6) => {
                p.thermal_override = n.parse().ok();
                0
            }
            ["reset"] => {
                p.thermal_override = None;
                0
            }
            _ => {
                io.warn("Error: status code not in range [0..6]");
                255
            }
        }),
        _ => {
            io.warn(format!("cmd: Can't find service: {service}"));
            20
        }
    }
}

fn cmd_wifi(p: &mut Phone, args: &[&str], io: &mut Io) -> i32 {
    match args {
        ["status"] if p.enabled("wifi_on") => {
            io.out.extend_from_slice(WIFI_STATUS.as_bytes());
            io.out.push(b'\n');
        }
        ["status"] => {
            io.say("Wifi is disabled");
            io.say("Wifi scanning is only available when wifi is enabled");
        }
        ["set-wifi-enabled", how @ ("enabled" | "disabled")] => set_global(p, "wifi_on", *how == "enabled"),
        _ => {
            io.warn(format!("Unknown command: {}", args.join(" ")));
            return 255;
        }
    }
    0
}

fn dumpsys(p: &mut Phone, args: &[&str], io: &mut Io) -> i32 {
    match args {
        ["battery", rest @ ..] => battery(p, rest, io),
        ["batterystats", rest @ ..] => batterystats(p, rest, io),
        ["thermalservice"] => thermal(p, io),
        ["bluetooth_manager"] => {
            let on = p.enabled("bluetooth_on");
            io.say("Bluetooth Status");
            io.say(format!("  enabled: {on}"));
            io.say(format!("  state: {}", if on { "ON" } else { "OFF" }));
            io.say("  address: 3C:28:6D:A1:52:0E");
            io.say(format!("  name: {}", p.props["ro.product.model"]));
            0
        }
        ["activity", "activities"] | ["activity", "a"] => activities(p, io),
        ["meminfo", package] => meminfo(p, package, io),
        ["wifi"] if p.enabled("wifi_on") => {
            io.out.extend_from_slice(DUMPSYS_WIFI.as_bytes());
            0
        }
        ["wifi"] => {
            io.say("Wi-Fi is disabled");
            0
        }
        [service, ..] => {
            io.warn(format!("Can't find service: {service}"));
            0
        }
        [] => {
            io.warn("dumpsys: the stand-in lists no services");
            1
        }
    }
}

fn battery(p: &mut Phone, args: &[&str], io: &mut Io) -> i32 {
    let b = &mut p.battery;
    match args {
        [] => {
            let r = b.reported();
            io.say("Current Battery Service state:");
            if b.frozen.is_some() {
                io.say("  (UPDATES STOPPED -- use 'reset' to restart)");
            }
            let max_current = if r.ac {
                3_000_000
            } else if r.usb {
                500_000
            } else {
                0
            };
            let max_voltage = if r.ac || r.usb { 5_000_000 } else { 0 };
            for (label, value) in [
                ("AC powered", r.ac.to_string()),
                ("USB powered", r.usb.to_string()),
                ("Wireless powered", r.wireless.to_string()),
                ("Max charging current", max_current.to_string()),
                ("Max charging voltage", max_voltage.to_string()),
                ("Charge counter", r.charge_counter.to_string()),
                ("status", r.status.to_string()),
                ("health", "2".to_string()),
                ("present", r.present.to_string()),
                ("level", r.level.to_string()),
                ("scale", "100".to_string()),
                ("voltage", r.voltage.to_string()),
                ("temperature", r.temperature.to_string()),
                ("technology", "Li-ion".to_string()),
            ] {
                io.say(format!("  {label}: {value}"));
            }
            0
        }
        ["reset"] => {
            b.frozen = None;
            0
        }
        ["unplug"] => {
            let mut r = b.reported();
            (r.ac, r.usb, r.wireless) = (false, false, false);
            b.frozen = Some(r);
            0
        }
        ["set", key, value] => {
            let mut r = b.reported();
            let Ok(v) = value.parse::<i64>() else {
                io.warn(format!("Bad value: {value}"));
                return 255;
            };
            let field: Option<fn(&mut Reported, i64)> = match *key {
                "ac" => Some(|r, v| r.ac = v != 0),
                "usb" => Some(|r, v| r.usb = v != 0),
                "wireless" => Some(|r, v| r.wireless = v != 0),
                "status" => Some(|r, v| r.status = v as u8),
                "level" => Some(|r, v| r.level = v.clamp(0, 100) as u8),
                "counter" => Some(|r, v| r.charge_counter = v),
                "temp" => Some(|r, v| r.temperature = v as i32),
                "present" => Some(|r, v| r.present = v != 0),
                _ => None,
            };
            let Some(set) = field else {
                io.warn(format!("Unknown set option: {key}"));
                return 255;
            };
            set(&mut r, v);
            b.frozen = Some(r);
            0
        }
        _ => {
            io.say("Battery service (battery) commands:");
            io.say("  set [-f] [ac|usb|wireless|status|level|temp|present|counter|invalid] <value>");
            io.say("  unplug [-f]");
            io.say("  reset [-f]");
            0
        }
    }
}

fn batterystats(p: &mut Phone, args: &[&str], io: &mut Io) -> i32 {
    match args {
        ["--reset"] => {
            p.reset_history();
            io.say("Battery stats reset.")
        }
        ["--checkin"] | ["-c"] => {
            // The captured checkin, with a `uid` row per installed package, as
            // BatteryStats.dumpCheckinLocked prints them after `vers`, and the battery
            // history of this phone in place of the captured one's plug state.
            let mut lines = CHECKIN.lines();
            if let Some(vers) = lines.next() {
                io.say(vers);
            }
            for (name, pkg) in &p.packages {
                io.say(format!("9,0,i,uid,{},{name}", pkg.uid));
            }
            let mut cursor = if p.history.reset_ms > 0 { p.history.reset_ms } else { p.boot_ms };
            for line in lines {
                io.say(history_line(p, line, &mut cursor));
            }
            let level = p.battery.reported().level;
            for &(at, charging, plugged) in &p.history.changes {
                let delta = at.saturating_sub(cursor);
                cursor = cursor.max(at);
                io.say(format!("9,h,{delta},Bs={},Bp={}", if charging { "c" } else { "d" }, plug(plugged)));
            }
            io.say(format!("9,h,{},Bl={level}", p.now_ms.saturating_sub(cursor)));
        }
        _ => io.out.extend_from_slice(HISTORY.as_bytes()),
    }
    0
}

fn plug(plugged: bool) -> &'static str {
    if plugged { "u" } else { "n" }
}

/// A captured history row with this phone's clock and battery: the reset's time, the
/// first record's level and plug state. Moves `cursor` (ms) by the row's delta.
fn history_line(p: &Phone, line: &str, cursor: &mut u64) -> String {
    let Some(rest) = line.strip_prefix("9,h,") else { return line.to_string() };
    if rest.contains(":RESET:TIME:") {
        return format!("9,h,0:RESET:TIME:{cursor}");
    }
    let mut fields: Vec<String> = rest.split(',').map(str::to_string).collect();
    *cursor += fields[0].parse::<u64>().unwrap_or(0);
    let first = p.history.changes.first();
    for f in fields.iter_mut().skip(1) {
        match f.split_once('=').map(|(k, _)| k) {
            Some("Bl") => *f = format!("Bl={}", p.battery.reported().level),
            Some("Bs") => *f = format!("Bs={}", if first.is_some_and(|c| c.1) { "c" } else { "d" }),
            Some("Bp") => *f = format!("Bp={}", plug(first.is_some_and(|c| c.2))),
            _ => {}
        }
    }
    format!("9,h,{}", fields.join(","))
}

/// PowerManager.THERMAL_STATUS_* from the skin temperature, with the thresholds of a
/// typical Pixel thermal config (39, 41, 44, 47, 50, 55 °C).
fn thermal_status(skin_c: f64) -> u8 {
    [39.0, 41.0, 44.0, 47.0, 50.0, 55.0].iter().filter(|t| skin_c >= **t).count() as u8
}

fn thermal(p: &Phone, io: &mut Io) -> i32 {
    let battery_c = f64::from(p.battery.temperature) / 10.0;
    let skin = battery_c + 2.3;
    let status = p.thermal_override.unwrap_or_else(|| thermal_status(skin));
    let temps =
        [(battery_c, 2, "battery"), (skin, 3, "skin"), (battery_c + 6.1, 0, "cpu0"), (battery_c + 4.4, 1, "gpu0")];
    let temp = |(v, t, n): (f64, i32, &str)| {
        let s = if t == 3 { status } else { 0 };
        format!("\tTemperature{{mValue={v:.1}, mType={t}, mName={n}, mStatus={s}}}")
    };
    io.say(format!("IsStatusOverride: {}", p.thermal_override.is_some()));
    io.say("ThermalEventListeners:\n\tcallbacks: 1\n\tkilled: false\n\tbroadcasts count: -1");
    io.say("ThermalStatusListeners:\n\tcallbacks: 1\n\tkilled: false\n\tbroadcasts count: -1");
    io.say(format!("Thermal Status: {status}"));
    io.say("Cached temperatures:");
    io.say(temp(temps[1]));
    io.say("HAL Ready: true");
    io.say("HAL connection:\n\tThermalHAL 2.0 connected: yes");
    io.say("Current temperatures from HAL:");
    for t in temps {
        io.say(temp(t));
    }
    io.say("Current cooling devices from HAL:");
    io.say("\tCoolingDevice{mValue=0, mType=2, mName=thermal-cpufreq-0}");
    0
}

/// `ActivityRecord{hash u0 PKG/.Act tTASK}` for the component in front.
fn activity_record(component: &str) -> String {
    let hash: u32 = component.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    format!("ActivityRecord{{{:07x} u0 {component} t{}}}", hash & 0xfff_ffff, 100 + hash % 900)
}

fn activities(p: &Phone, io: &mut Io) -> i32 {
    let record = activity_record(&p.resumed);
    let package = p.resumed.split('/').next().unwrap_or_default();
    let uid = p.packages.get(package).map_or(10_170, |pkg| pkg.uid);
    io.say("ACTIVITY MANAGER ACTIVITIES (dumpsys activity activities)");
    io.say("Display #0 (activities from top to bottom):");
    io.say(format!("  * Task{{5d2f6a1 #{} type=standard A={uid}:{package} U=0 visible=true mode=fullscreen}}", 100));
    io.say(format!("    mResumedActivity: {record}"));
    io.say("");
    io.say(format!("  ResumedActivity: {record}"));
    0
}

fn meminfo(p: &Phone, package: &str, io: &mut Io) -> i32 {
    let (Some(pkg), Some(pid)) = (p.packages.get(package), p.pids_of(package).first().copied()) else {
        io.say(format!("No process found for: {package}"));
        return 0;
    };
    // Rows of ActivityThread's meminfo table: (name, share of the PSS, private dirty share).
    let rows = [
        ("Native Heap", 0.29, 0.99),
        ("Dalvik Heap", 0.16, 0.99),
        ("Dalvik Other", 0.04, 0.99),
        ("Stack", 0.02, 1.0),
        (".so mmap", 0.06, 0.06),
        (".apk mmap", 0.04, 0.0),
        (".dex mmap", 0.07, 0.0),
        (".art mmap", 0.04, 0.87),
        ("Other mmap", 0.01, 0.3),
        ("GL mtrack", 0.12, 1.0),
        ("Unknown", 0.15, 0.99),
    ];
    let total = pkg.pss_kb;
    let cells: Vec<(&str, u64, u64, u64)> = rows
        .iter()
        .map(|(name, share, dirty)| {
            let pss = (total as f64 * share) as u64;
            let private = (pss as f64 * dirty) as u64;
            (*name, pss, private, pss + pss / 3)
        })
        .collect();
    let pss_sum: u64 = cells.iter().map(|c| c.1).sum();
    let (cells_total, dirty_sum, rss_sum) =
        (pss_sum, cells.iter().map(|c| c.2).sum::<u64>(), cells.iter().map(|c| c.3).sum::<u64>());
    let uptime = p.now_ms - p.boot_ms;
    io.say("Applications Memory Usage (in Kilobytes):");
    io.say(format!("Uptime: {uptime} Realtime: {uptime}"));
    io.say("");
    io.say(format!("** MEMINFO in pid {pid} [{package}] **"));
    io.say("                   Pss  Private  Private  SwapPss      Rss");
    io.say("                 Total    Dirty    Clean    Dirty    Total");
    io.say("                ------   ------   ------   ------   ------");
    for (name, pss, private, rss) in &cells {
        io.say(format!("{name:>13} {pss:>8} {private:>8} {:>8} {:>8} {rss:>8}", pss - private, 0));
    }
    io.say(format!(
        "{:>13} {cells_total:>8} {dirty_sum:>8} {:>8} {:>8} {rss_sum:>8}",
        "TOTAL",
        cells_total - dirty_sum,
        0
    ));
    io.say("");
    io.say(" App Summary");
    io.say(format!("{:>22}{:>31}", "Pss(KB)", "Rss(KB)"));
    io.say(format!("{:>22}{:>31}", "------", "------"));
    io.say(format!("{:>20}: {:>8}", "Java Heap", cells[1].1 + cells[7].1));
    io.say(format!("{:>20}: {:>8}", "Native Heap", cells[0].1));
    io.say("");
    io.say(format!(
        "{:>20}: {cells_total:>8}{:>20}: {rss_sum:>8}{:>20}: {:>8}",
        "TOTAL PSS", "TOTAL RSS", "TOTAL SWAP PSS", 0
    ));
    0
}

/// A proc(5) stat line; an app's utime and stime grow with its run time and CPU share.
pub fn proc_stat(p: &Phone, pid: u32) -> Option<String> {
    let (comm, started_ms, share, rss_pages) = match p.processes.get(&pid)? {
        Process::App { package, started_ms } => {
            let pkg = p.packages.get(package)?;
            // ART names the main thread after the package's last 15 bytes.
            let comm = &package[package.len().saturating_sub(15)..];
            (comm.to_string(), *started_ms, pkg.cpu_share, pkg.pss_kb * 3 / 8)
        }
        Process::Perfetto { started_ms, .. } => ("perfetto".to_string(), *started_ms, 0.01, 1_200),
    };
    let ticks = p.now_ms.saturating_sub(started_ms) as f64 / 10.0 * share;
    let (utime, stime) = ((ticks * 0.8) as u64, (ticks * 0.2) as u64);
    let start = started_ms.saturating_sub(p.boot_ms) / 10;
    Some(format!(
        "{pid} ({comm}) S {ZYGOTE} {ZYGOTE} 0 0 -1 1077952832 {} 0 {} 0 {utime} {stime} 0 0 10 -10 {} 0 {start} \
         15376191488 {rss_pages} 18446744073709551615 1 1 0 0 0 0 4612 1 1073775868 0 0 0 17 {} 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        utime * 9 + 4000,
        utime / 40,
        20 + pid % 17,
        pid % 8,
    ))
}

/// `perfetto [--background] -c FILE|- [--txt] -o FILE`: a session that leaves a real trace
/// in FILE when killed, or when the config's `duration_ms` has passed.
fn perfetto(store: &Store, args: &[&str], io: &mut Io) -> i32 {
    let (mut background, mut config, mut out) = (false, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "--background" | "-d" => background = true,
            "-c" | "--config" => config = it.next().copied(),
            "-o" | "--out" => out = it.next().copied(),
            "--txt" => {}
            other => {
                io.warn(format!("perfetto: unrecognized option '{other}'"));
                return 1;
            }
        }
    }
    let Some(out) = out else {
        io.warn("Either --out or --upload or --dropbox is required");
        return 1;
    };
    let text = match config {
        Some("-") => String::from_utf8_lossy(&io.stdin_bytes()).to_string(),
        Some(path) => match read_config(store, path) {
            Ok(text) => text,
            Err(why) => {
                io.warn(format!("perfetto_cmd.cc: Could not open {path} ({why})"));
                return 1;
            }
        },
        None => String::new(),
    };
    let duration_ms: Option<u64> = text
        .split("duration_ms:")
        .nth(1)
        .and_then(|rest| rest.trim_start().split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok());
    if !background {
        on_phone(store, io, |p, _| {
            store.begin_trace(out, p);
            0
        });
        std::thread::sleep(std::time::Duration::from_millis(duration_ms.unwrap_or(0).min(60_000)));
        return on_phone(store, io, |p, _| {
            store.finish_trace(out, p);
            0
        });
    }
    let out = out.to_string();
    on_phone(store, io, |p, io| {
        store.begin_trace(&out, p);
        let now = p.now_ms;
        let pid = p.spawn(Process::Perfetto { out, started_ms: now, ends_ms: duration_ms.map(|d| now + d) });
        io.say(pid.to_string());
        0
    })
}

/// A config file as perfetto may read it: SELinux lets it read only files labelled
/// `perfetto_configs_data_file`, the folder /data/misc/perfetto-configs that Android 12
/// (SDK 31) added; before that only stdin works (`-c -`).
fn read_config(store: &Store, path: &str) -> Result<String, &'static str> {
    let sdk: u32 =
        store.update(|p| p.props.get("ro.build.version.sdk").and_then(|v| v.parse().ok()).unwrap_or(0)).unwrap_or(0);
    if sdk < 31 || !path.starts_with("/data/misc/perfetto-configs/") {
        return Err("errno: 13, Permission denied");
    }
    std::fs::read_to_string(store.host_path(path)).map_err(|_| "errno: 2, No such file or directory")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phone::Power;

    #[test]
    fn thermal_status_follows_the_thresholds() {
        assert_eq!(thermal_status(27.4), 0);
        assert_eq!(thermal_status(42.0), 2);
        assert_eq!(thermal_status(60.0), 6);
    }

    #[test]
    fn brightness_is_validated_like_settings_provider() {
        assert!(invalid_setting("screen_brightness", "256"));
        assert!(invalid_setting("screen_brightness", "dim"));
        assert!(!invalid_setting("screen_brightness", "255"));
        assert!(!invalid_setting("font_scale", "anything"));
    }

    #[test]
    fn an_unplugged_power_state_is_what_the_battery_reports() {
        let mut p = Phone::new("S", 0);
        p.battery.power = Power::None;
        let mut io = Io { stdin: &mut std::io::empty(), out: Vec::new(), err: Vec::new() };
        battery(&mut p, &[], &mut io);
        let text = String::from_utf8(io.out).unwrap();
        assert!(text.contains("  USB powered: false\n") && text.contains("  status: 3\n"), "{text}");
    }
}
