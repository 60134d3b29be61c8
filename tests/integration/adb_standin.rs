//! Debian's real adb client and server against the device-side stand-in
//! (standins/adb-phone): everything but the phone is real. Each test starts its own adb
//! server (`adb -P PORT`, `ADB_EMU=0`, its own HOME and so its own key) and its own phone
//! on 127.0.0.1, and `adb connect`s them. Ignored where /usr/bin/adb is missing
//! (`#[test_needs::needs(adb)]`), unless LAB_REQUIRE_ADB=1 (CI), where they run and fail.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::adb::*;
use lab::collect::android::perfetto::PowerTrace;
use lab::collect::{
    android::battery as android_battery, android::batterystats_checkin, android::bluetooth, android::meminfo,
    android::settings, android::thermal, android::wifi_status, linux::proc_stat,
};
use lab::transport::shell_quote;

const TRACE: &[u8] = include_bytes!("../fixtures/devices/android/power_rails_session_uuid_perfetto.pftrace");

#[test_needs::needs(adb)]
#[test]
fn connect_features_and_shell_v2_exit_codes_and_stderr() {
    let (adb, phone, _dir) = setup(&[]);
    let devices = adb.devices();
    assert!(
        devices.lines().any(|l| l.starts_with(&phone.serial) && l.contains(" device ") && l.contains("model:Pixel_5")),
        "{devices}"
    );
    let features = adb.on(&phone, &["features"]).out;
    assert!(features.lines().any(|f| f == "shell_v2") && features.lines().any(|f| f == "cmd"), "{features}");
    assert_eq!(adb.on(&phone, &["wait-for-device"]).code, 0);

    assert_eq!(adb.sh(&phone, "getprop ro.product.model"), "Pixel 5\n");
    let r = adb.shell(&phone, "false");
    assert_eq!((r.code, r.out.as_str()), (1, ""));
    assert_eq!(adb.shell(&phone, "echo out; exit 3").code, 3);
    let r = adb.shell(&phone, "cat /no/such/file; echo after");
    assert_eq!(
        (r.out.as_str(), r.err.as_str(), r.code),
        ("after\n", "cat: /no/such/file: No such file or directory\n", 0)
    );
    // The lab's backend ends every command with a sentinel.
    let r = adb.shell(&phone, "frobnicate --now; echo \"__lab_exit=$?\"");
    assert_eq!(r.out, "__lab_exit=127\n");
    assert_eq!(r.err, "/system/bin/sh: frobnicate: inaccessible or not found\n");
    // Stdin streams through shell v2 to the command.
    let r = adb.run_with(&["-s", &phone.serial, "shell", "sha256sum"], b"abc");
    assert_eq!(r.out, format!("{}  -\n", sha256(b"abc")));
}

/// The shape of the Android backend's batched state read: each argv quoted with the lab's
/// `shell_quote`, parts split by an echoed mark, the exit status in a final sentinel.
#[test_needs::needs(adb)]
#[test]
fn a_batched_state_read_as_the_backend_sends_it_parses() {
    let (adb, phone, _dir) = setup(&[]);
    let argvs: [&[&str]; 5] = [
        &["settings", "get", "system", "screen_brightness"],
        &["cmd", "wifi", "status"],
        &["dumpsys", "battery"],
        &["dumpsys", "thermalservice"],
        &["getprop", "ro.build.fingerprint"],
    ];
    let quoted = argvs.iter().map(|a| a.iter().map(|w| shell_quote(w)).collect::<Vec<_>>().join(" "));
    let script = quoted.map(|c| format!("{c}; echo @@lab-part@@")).collect::<Vec<_>>().join("; ");
    let out = adb.sh(&phone, &format!("{script}; echo \"__lab_exit=$?\""));
    let (body, status) = out.rsplit_once("__lab_exit=").unwrap();
    assert_eq!(status, "0\n");
    let parts: Vec<&str> = body.split("@@lab-part@@").map(|p| p.trim_matches('\n')).collect();
    assert_eq!(parts.len(), 6, "{out}");
    assert_eq!(settings::parse(parts[0]).unwrap().as_f64(), Some(102.0));
    assert_eq!(wifi_status::parse(parts[1]).unwrap().enabled, Some(true));
    assert_eq!(android_battery::parse(parts[2]).unwrap().status_code, Some(2));
    assert_eq!(thermal::parse(parts[3]).unwrap().status, 0);
    assert!(parts[4].starts_with("google/redfin/redfin:13/"), "{}", parts[4]);
}

#[test_needs::needs(adb)]
#[test]
fn push_then_pull_round_trips_the_bytes() {
    let (adb, phone, dir) = setup(&[]);
    let local = dir.path().join("blob.bin");
    let data = apk("not.an.app", None, 3_000_000); // many 64 KiB sync chunks, several WRTEs each
    std::fs::write(&local, &data).unwrap();
    let pushed = adb.on(&phone, &["push", local.to_str().unwrap(), "/data/local/tmp/blob.bin"]);
    assert_eq!(pushed.code, 0, "{}", pushed.err);
    assert_eq!(
        adb.sh(&phone, "sha256sum /data/local/tmp/blob.bin"),
        format!("{}  /data/local/tmp/blob.bin\n", sha256(&data))
    );
    let back = dir.path().join("back.bin");
    let pulled = adb.on(&phone, &["pull", "/data/local/tmp/blob.bin", back.to_str().unwrap()]);
    assert_eq!(pulled.code, 0, "{}", pulled.err);
    assert!(std::fs::read(&back).unwrap() == data, "the pulled file differs");
    // `adb ls` is sync LIST: mode, size and mtime in hex, then the name.
    let listed = adb.on(&phone, &["ls", "/data/local/tmp"]).out;
    assert!(listed.lines().any(|l| l.ends_with(" blob.bin") && l.contains(&format!("{:08x}", data.len()))), "{listed}");
    adb.sh(&phone, "rm /data/local/tmp/blob.bin");
    assert!(!adb.on(&phone, &["ls", "/data/local/tmp"]).out.contains("blob.bin"));
    let missing = adb.on(&phone, &["pull", "/data/local/tmp/nothing", back.to_str().unwrap()]);
    assert_ne!(missing.code, 0);
    // adb 29 prints this error on stdout.
    assert!(
        missing.out.contains("failed to stat remote object '/data/local/tmp/nothing': No such file or directory"),
        "{}",
        missing.out
    );
}

#[test_needs::needs(adb)]
#[test]
fn install_puts_the_streamed_apk_where_pm_path_says() {
    let (adb, phone, dir) = setup(&[]);
    let base = apk("com.example.energy", None, 700_000);
    let split = apk("com.example.energy", Some("config.arm64_v8a"), 90_000);
    let (base_file, split_file) = (dir.path().join("app.apk"), dir.path().join("split.apk"));
    std::fs::write(&base_file, &base).unwrap();
    std::fs::write(&split_file, &split).unwrap();

    let r = adb.on(&phone, &["install", "-r", "-g", base_file.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{} {}", r.out, r.err);
    assert!(r.out.contains("Success"), "{}", r.out);
    let path = adb.sh(&phone, "pm path com.example.energy");
    let apk_path = path.trim().strip_prefix("package:").unwrap();
    assert!(apk_path.starts_with("/data/app/~~") && apk_path.ends_with("/base.apk"), "{path}");
    assert_eq!(adb.sh(&phone, &format!("sha256sum {apk_path}")), format!("{}  {apk_path}\n", sha256(&base)));
    assert_eq!(adb.sh(&phone, "pm list packages"), "package:com.example.energy\n");

    let r = adb.on(&phone, &["install-multiple", "-r", base_file.to_str().unwrap(), split_file.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{} {}", r.out, r.err);
    let paths: Vec<String> = adb
        .sh(&phone, "pm path com.example.energy")
        .lines()
        .map(|l| l.strip_prefix("package:").unwrap().to_string())
        .collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert!(paths[1].ends_with("/split_config.arm64_v8a.apk"), "{paths:?}");
    let sums = adb.sh(&phone, &format!("sha256sum {} {}", paths[0], paths[1]));
    assert_eq!(sums, format!("{}  {}\n{}  {}\n", sha256(&base), paths[0], sha256(&split), paths[1]));

    let not_apk = dir.path().join("junk.apk");
    std::fs::write(&not_apk, b"no manifest here").unwrap();
    let r = adb.on(&phone, &["install", not_apk.to_str().unwrap()]);
    assert_ne!(r.code, 0);
    assert!(r.err.contains("INSTALL_PARSE_FAILED_NOT_APK"), "{} {}", r.out, r.err);
}

#[test_needs::needs(adb)]
#[test]
fn settings_radios_and_thermal_keep_their_state() {
    let (adb, phone, _dir) = setup(&[]);
    adb.sh(&phone, "settings put system screen_brightness_mode 0; settings put system screen_brightness 200");
    assert_eq!(adb.sh(&phone, "settings get system screen_brightness"), "200\n");
    assert_eq!(adb.sh(&phone, "settings get global no_such_key"), "null\n");
    let r = adb.shell(&phone, "settings put system screen_brightness 300");
    assert_eq!(r.code, 255);
    assert!(r.err.contains("IllegalArgumentException: Invalid value: 300 for setting: screen_brightness"), "{}", r.err);
    assert_eq!(adb.sh(&phone, "settings get system screen_brightness"), "200\n");

    adb.sh(&phone, "svc wifi disable");
    assert_eq!(adb.sh(&phone, "settings get global wifi_on"), "0\n");
    assert!(adb.sh(&phone, "cmd wifi status").starts_with("Wifi is disabled\n"));
    adb.sh(&phone, "svc wifi enable");
    let wifi = wifi_status::parse(&adb.sh(&phone, "cmd wifi status")).unwrap();
    assert_eq!(wifi.info.and_then(|i| i.ssid).as_deref(), Some("GoogleGuest"));

    adb.sh(&phone, "cmd bluetooth_manager disable");
    assert!(!bluetooth::parse(&adb.sh(&phone, "dumpsys bluetooth_manager")).unwrap().enabled);
    adb.sh(&phone, "svc bluetooth enable");
    assert!(bluetooth::parse(&adb.sh(&phone, "dumpsys bluetooth_manager")).unwrap().enabled);

    let t = thermal::parse(&adb.sh(&phone, "dumpsys thermalservice")).unwrap();
    assert_eq!(t.status, 0);
    assert_eq!(t.max_of_type("BATTERY"), Some(25.1));
    adb.sh(&phone, "cmd thermalservice override-status 3");
    assert_eq!(thermal::parse(&adb.sh(&phone, "dumpsys thermalservice")).unwrap().status, 3);
}

#[test_needs::needs(adb)]
#[test]
fn unplugged_the_phone_discharges_and_its_charge_counter_falls() {
    let (adb, phone, dir) = setup(&[]);
    let battery = |adb: &Adb| android_battery::parse(&adb.sh(&phone, "dumpsys battery")).unwrap();
    let plugged = battery(&adb);
    assert_eq!((plugged.status_code, plugged.powered_by.clone()), (Some(2), vec!["USB".to_string()]));

    // The tether cuts USB power; 36 A drains 10 mAh a second, so the fall is plain.
    edit_state(&root(&dir), |s| {
        s["battery"]["power"] = "none".into();
        s["battery"]["discharge_ua"] = 36_000_000.0.into();
    });
    let first = battery(&adb);
    std::thread::sleep(Duration::from_millis(1200));
    let second = battery(&adb);
    assert_eq!(first.status_code, Some(3));
    assert!(first.powered_by.is_empty());
    let fell_mah = (first.charge_counter_uah.unwrap() - second.charge_counter_uah.unwrap()) as f64 / 1000.0;
    // At least 1.2 s passed between the two reads; a loaded machine may take longer.
    assert!((11.0..100.0).contains(&fell_mah), "fell {fell_mah} mAh in 1.2 s or a little more");

    // `dumpsys battery unplug` only changes what BatteryService shows, and freezes it.
    edit_state(&root(&dir), |s| s["battery"]["power"] = "usb".into());
    adb.sh(&phone, "dumpsys battery unplug");
    let frozen = battery(&adb);
    std::thread::sleep(Duration::from_millis(300));
    let still = battery(&adb);
    assert!(frozen.updates_stopped && frozen.powered_by.is_empty());
    assert_eq!((frozen.status_code, frozen.charge_counter_uah), (Some(2), still.charge_counter_uah));
    adb.sh(&phone, "dumpsys battery set level 42");
    assert_eq!(battery(&adb).level, 42);
    adb.sh(&phone, "dumpsys battery reset");
    let live = battery(&adb);
    assert!(!live.updates_stopped && live.powered_by == ["USB"] && live.level != 42);

    assert_eq!(adb.sh(&phone, "dumpsys batterystats --reset"), "Battery stats reset.\n");
}

#[test_needs::needs(adb)]
#[test]
fn am_start_records_the_extras_and_the_app_runs_until_stopped() {
    let (adb, phone, dir) = setup(&[]);
    let apk_file = dir.path().join("app.apk");
    std::fs::write(&apk_file, apk("com.example.energy", None, 20_000)).unwrap();
    assert_eq!(adb.on(&phone, &["install", apk_file.to_str().unwrap()]).code, 0);

    let out = adb
        .sh(&phone, "am start -W -S -n com.example.energy/.MainActivity --es mode soak --ei rounds 3 --ez dark true");
    let lines: Vec<&str> = out.lines().map(|l| l.split(':').next().unwrap()).collect();
    assert_eq!(
        lines,
        ["Stopping", "Starting", "Status", "LaunchState", "Activity", "TotalTime", "WaitTime", "Complete"],
        "{out}"
    );
    assert!(out.contains("Starting: Intent { cmp=com.example.energy/.MainActivity (has extras) }\n"), "{out}");
    assert!(out.contains("LaunchState: COLD\n"), "{out}");
    let launch = &state(&root(&dir))["launches"][0];
    assert_eq!(launch["component"], "com.example.energy/.MainActivity");
    assert_eq!(launch["extras"]["rounds"], serde_json::json!({"type": "int", "value": 3}));
    assert_eq!(launch["extras"]["mode"]["value"], "soak");
    assert_eq!(launch["extras"]["dark"]["value"], true);
    let activities = adb.sh(&phone, "dumpsys activity activities");
    assert!(
        activities.lines().any(|l| l.contains("mResumedActivity:") && l.contains("com.example.energy/.MainActivity"))
    );

    let pid = adb.sh(&phone, "pidof com.example.energy").trim().to_string();
    edit_state(&root(&dir), |s| s["packages"]["com.example.energy"]["cpu_share"] = 1.0.into());
    let stat = |adb: &Adb| proc_stat::parse(&adb.sh(&phone, &format!("cat /proc/{pid}/stat"))).unwrap();
    let before = stat(&adb);
    std::thread::sleep(Duration::from_millis(500));
    let after = stat(&adb);
    assert_eq!(before.pid.to_string(), pid);
    let grew_ms = after.cpu_ms(100) - before.cpu_ms(100);
    assert!(
        (400.0..10_000.0).contains(&grew_ms),
        "one core's worth of CPU for 0.5 s or a little more grew {grew_ms} ms"
    );

    let mem = meminfo::parse(&adb.sh(&phone, "dumpsys meminfo com.example.energy")).unwrap();
    assert_eq!(mem.processes.len(), 1);
    assert_eq!(mem.processes[0].pid.to_string(), pid);
    assert!((50_000..60_000).contains(&mem.total_pss_kb()), "{mem:?}");

    let checkin = batterystats_checkin::parse(&adb.sh(&phone, "dumpsys batterystats --checkin")).unwrap();
    let uid = state(&root(&dir))["packages"]["com.example.energy"]["uid"].as_i64().unwrap();
    assert_eq!(checkin.packages.get(&uid), Some(&vec!["com.example.energy".to_string()]));

    let r = adb.shell(&phone, &format!("kill {pid}"));
    assert_eq!((r.code, r.err.trim()), (1, format!("/system/bin/sh: kill: {pid}: Operation not permitted").as_str()));
    adb.sh(&phone, "am force-stop com.example.energy");
    assert_eq!(adb.shell(&phone, "pidof com.example.energy").code, 1);
    assert!(!adb.sh(&phone, "dumpsys activity activities").contains("com.example.energy"));

    let r = adb.shell(&phone, "am start -W -n com.example.absent/.Main; echo \"__lab_exit=$?\"");
    assert!(r.out.contains(
        "Error type 3\nError: Activity class {com.example.absent/com.example.absent.Main} does not exist.\n"
    ));
    assert!(r.out.ends_with("__lab_exit=0\n"), "am start reports errors with status 0: {}", r.out);
}

#[test_needs::needs(adb)]
#[test]
fn perfetto_in_the_background_leaves_its_trace_when_killed() {
    let (adb, phone, dir) = setup(&[]);
    let config = b"buffers { size_kb: 1024 }\nduration_ms: 600000\n";
    let remote = "/data/misc/perfetto-traces/soak.pftrace";
    let args =
        ["-s", &phone.serial, "shell", "perfetto --background -c - --txt -o /data/misc/perfetto-traces/soak.pftrace"];
    let r = adb.run_with(&args, config);
    assert_eq!(r.code, 0, "{}", r.err);
    let pid: u32 = r.out.trim().parse().unwrap_or_else(|_| panic!("perfetto printed {:?}", r.out));
    assert_eq!(adb.sh(&phone, "pidof perfetto").trim(), pid.to_string());
    // With write_into_file the file is there from the start: one battery sample, no rails yet.
    let cat = adb.output(&["-s", &phone.serial, "exec-out", "cat", remote], b"", Duration::from_secs(60));
    let early = PowerTrace::parse(&cat.stdout).unwrap();
    assert_eq!((early.battery.len(), early.rails.len()), (1, 0));
    assert_eq!(adb.shell(&phone, &format!("kill -0 {pid}")).code, 0, "kill -0 only asks");
    adb.sh(&phone, &format!("kill {pid}"));
    assert_ne!(adb.shell(&phone, &format!("kill -0 {pid}")).code, 0, "the session ended");
    let local = dir.path().join("soak.pftrace");
    assert_eq!(adb.on(&phone, &["pull", remote, local.to_str().unwrap()]).code, 0);
    let pulled = std::fs::read(&local).unwrap();
    assert_eq!(adb.sh(&phone, &format!("stat -c %s {remote}")).trim(), pulled.len().to_string());
    let trace = PowerTrace::parse(&pulled).unwrap();
    assert_eq!(trace.energy_per_rail_uws(), PowerTrace::parse(TRACE).unwrap().energy_per_rail_uws());
    assert_eq!(trace.battery.len(), 2, "a sample at the start and one at the end");
}

#[test_needs::needs(adb)]
#[test]
fn perfetto_reads_a_config_file_only_from_perfetto_configs_on_android_12_and_later() {
    let (adb, phone, dir) = setup(&[]);
    let start = "echo 'duration_ms: 1' > /data/misc/perfetto-configs/c.pbtxt && perfetto --txt \
                 -c /data/misc/perfetto-configs/c.pbtxt -o /data/misc/perfetto-traces/t.pftrace";
    assert_eq!(adb.shell(&phone, start).code, 0, "Android 13");
    assert_eq!(adb.shell(&phone, "ls /data/misc/perfetto-traces/t.pftrace").code, 0, "it ran for its duration_ms");
    let elsewhere = adb.shell(
        &phone,
        "echo 'duration_ms: 1' > /data/local/tmp/c.pbtxt; perfetto --txt -c /data/local/tmp/c.pbtxt -o /data/misc/perfetto-traces/u.pftrace",
    );
    assert!(elsewhere.code != 0 && elsewhere.err.contains("Permission denied"), "{}", elsewhere.err);
    edit_state(&root(&dir), |v| v["props"]["ro.build.version.sdk"] = "30".into());
    let r = adb.shell(&phone, start);
    assert!(
        r.code != 0 && r.err.contains("Could not open /data/misc/perfetto-configs/c.pbtxt"),
        "Android 11: {}",
        r.err
    );
}

#[test_needs::needs(adb)]
#[test]
fn a_phone_that_never_allows_the_host_is_unauthorized() {
    let (adb, phone, _dir) = setup(&["--auth", "never"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !adb.devices().contains("unauthorized") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let devices = adb.devices();
    assert!(devices.lines().any(|l| l.starts_with(&phone.serial) && l.contains("unauthorized")), "{devices}");
    let r = adb.shell(&phone, "true");
    assert_ne!(r.code, 0);
    assert!(r.err.contains("unauthorized"), "{}", r.err);
}

#[test_needs::needs(adb)]
#[test]
fn an_allowed_key_is_known_after_a_restart() {
    let (adb, mut phone, dir) = setup(&["--auth", "accept"]);
    assert_eq!(adb.on(&phone, &["wait-for-device"]).code, 0);
    assert_eq!(adb.sh(&phone, "echo hi"), "hi\n");
    assert!(phone.log().contains("host allowed by a new public key"), "{}", phone.log());
    assert_eq!(std::fs::read_to_string(root(&dir).join("adb_keys")).unwrap().lines().count(), 1);

    let port = phone.port;
    phone.kill();
    let phone = Phone::start(&root(&dir), port, &["--auth", "accept"]);
    adb.run(&["disconnect", &phone.serial]);
    adb.connect(&phone);
    // `adb connect` returns before the phone has authorized the host: until it has, a
    // command finds the device `unauthorized`.
    assert_eq!(adb.on(&phone, &["wait-for-device"]).code, 0);
    assert_eq!(adb.sh(&phone, "echo again"), "again\n");
    // The host signed the token with its key and the phone checked the signature.
    assert!(phone.log().contains("host allowed by a signature by a trusted key"), "{}", phone.log());

    // Another host's signature does not verify against the first host's key: it must offer its own.
    let other = Adb::start();
    other.connect(&phone);
    assert_eq!(other.on(&phone, &["wait-for-device"]).code, 0);
    assert_eq!(other.sh(&phone, "echo third"), "third\n");
    assert_eq!(phone.log().matches("host allowed by a new public key").count(), 2, "{}", phone.log());
    assert_eq!(std::fs::read_to_string(root(&dir).join("adb_keys")).unwrap().lines().count(), 2);
}

#[test_needs::needs(adb)]
#[test]
fn a_legacy_phone_has_no_shell_v2_but_a_shell_and_installs() {
    let (adb, phone, dir) = setup(&["--legacy"]);
    assert_eq!(adb.on(&phone, &["features"]).out.trim(), "");
    assert_eq!(adb.sh(&phone, "getprop ro.build.version.sdk"), "33\n");
    // Without shell_v2 the exit status is lost and stderr comes with stdout.
    let r = adb.shell(&phone, "cat /nope; false");
    assert_eq!((r.code, r.out.as_str()), (0, "cat: /nope: No such file or directory\n"));
    assert_eq!(adb.sh(&phone, "false; echo \"__lab_exit=$?\""), "__lab_exit=1\n");
    // Without `cmd`, adb pushes the APK and runs `pm install` on it.
    let bytes = apk("com.example.old", None, 50_000);
    let file = dir.path().join("old.apk");
    std::fs::write(&file, &bytes).unwrap();
    let r = adb.on(&phone, &["install", file.to_str().unwrap()]);
    assert!(r.out.contains("Success"), "{} {}", r.out, r.err);
    let path = adb.sh(&phone, "pm path com.example.old");
    let path = path.trim().strip_prefix("package:").unwrap();
    assert_eq!(adb.sh(&phone, &format!("sha256sum {path}")), format!("{}  {path}\n", sha256(&bytes)));
}

#[test_needs::needs(adb)]
#[test]
fn a_killed_phone_drops_and_a_restarted_one_is_the_same_phone() {
    let (adb, mut phone, dir) = setup(&["--serial", "0A281FDD4000ZZ"]);
    adb.sh(&phone, "settings put system screen_brightness 77");
    let script = "sleep 20; echo \"__lab_exit=$?\"";
    let mut long = adb
        .command(&["-s", &phone.serial, "shell", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let port = phone.port;
    phone.kill();
    let dropped = Instant::now();
    while long.try_wait().unwrap().is_none() {
        assert!(dropped.elapsed() < Duration::from_secs(10), "adb shell went on after the phone died");
        std::thread::sleep(Duration::from_millis(50));
    }
    // adb 29 exits 0 when the transport drops mid-command: only the missing sentinel tells.
    let out = long.wait_with_output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("__lab_exit="), "{out:?}");
    let r = adb.shell(&phone, "true");
    assert_ne!(r.code, 0);
    assert!(r.err.contains("offline") || r.err.contains("not found"), "{}", r.err);

    let phone = Phone::start(&root(&dir), port, &[]);
    let back = adb.output(&["-s", &phone.serial, "wait-for-device"], b"", Duration::from_secs(45));
    assert!(back.status.success());
    assert_eq!(adb.sh(&phone, "settings get system screen_brightness"), "77\n");
    assert_eq!(adb.sh(&phone, "getprop ro.serialno"), "0A281FDD4000ZZ\n");
}
