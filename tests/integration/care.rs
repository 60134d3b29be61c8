//! `lab care` through the binary on simulated phones tethered to the stand-in `uhubctl`
//! (standins/uhubctl): each phone is moved into its charge window by switching its port
//! (the stand-in's argv log says which, in what order), every port is on again when care
//! stops, and the readings it stores are what `lab status` shows.

use crate::common;

use common::TempLab;
use common::uhubctl::Hubs;
use serde_json::{Value, json};

/// A four-port hub switching ports one by one, with a phone on each of ports 1 to 3.
fn hub() -> Value {
    let phone = |serial: &str| json!({ "device": { "id": "18d1:4ee7", "vendor": "Google", "product": "Pixel", "serial": serial } });
    json!({ "hubs": [
        { "location": "1-1", "id": "2109:2817", "vendor": "VIA Labs, Inc.", "product": "USB2.0 Hub",
          "usb": "2.10", "switching": "ppps", "ports": [phone("A1"), phone("B2"), phone("C3"), {}] }
    ]})
}

/// Three simulated phones on hub 1-1 and one that is not on a hub:
/// - `full` starts at 85 % (above the window): cut at once, then drains into it in about two days;
/// - `low` starts at 20 %: charges on its port until 80 %, then is cut;
/// - `small` (a 100 mAh cell drawing 15 mW, charged at 100 mA) starts at 50 % and swings
///   between the limits several times in three days: cut at 80, on again at 40;
/// - `loose` has a software tether: skipped.
fn lab() -> TempLab {
    let sim = |name: &str, port: u32, extra: &str| {
        format!(
            "[[device]]\nname = \"{name}\"\nplatform = \"sim\"\nmodel = \"Pixel 5\"\n\
             tether = {{ uhubctl = {{ location = \"1-1\", port = {port} }} }}\n\
             [device.sim]\nemulates = \"android\"\n{extra}\n"
        )
    };
    TempLab::from_text(&format!(
        "[lab]\nname = \"care\"\n\n[care]\ncharge = [40, 80]\ninterval = \"30m\"\n\n{}{}{}\
         [[device]]\nname = \"loose\"\nplatform = \"sim\"\nmodel = \"Pixel 5\"\ntether = \"software\"\n[device.sim]\nemulates = \"android\"\n",
        sim("full", 1, "battery_start_pct = 85\nbattery_health_pct = 92\ncycle_count = 310"),
        sim("low", 2, "battery_start_pct = 20"),
        sim("small", 3, "battery_start_pct = 50\nbattery_mah = 100\ncharge_ma = 100"),
    ))
}

#[test]
fn care_moves_each_simulated_phone_into_its_window_by_switching_its_port() {
    let lab = lab();
    let hubs = Hubs::new(&hub());
    let out = lab.cmd(&["care", "--for", "3d"]).envs(hubs.env()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("loose: skipped: tether `software` is not a hub port care can switch"), "{stdout}");

    let all: Vec<String> = hubs.calls().into_iter().map(|(args, _)| args).collect();
    let calls = common::uhubctl::switches_with_their_listings(&all);
    let port = |p: u32| -> Vec<&str> {
        calls
            .iter()
            .filter(|c| c.starts_with(&format!("-l 1-1 -p {p} ")))
            .map(|c| c.rsplit(' ').next().unwrap())
            .collect()
    };
    // `full`: cut in the first pass, on again only when care stops.
    assert_eq!(port(1), ["off", "on"], "{calls:?}");
    // `low`: charged up to the upper limit, then cut; on again at the end.
    assert_eq!(port(2), ["off", "on"], "{calls:?}");
    // `small`: cut at 80 %, on at 40 %, … several times; care's last word is `on`.
    let small = port(3);
    assert!(small.len() >= 6, "{calls:?}");
    assert!(small.chunks(2).all(|c| c == ["off", "on"]), "strictly alternating, off first: {small:?}");
    assert_eq!(calls.len(), 4 + small.len(), "no other uhubctl call: {calls:?}");
    // Order: `full` is cut at the first pass (85 %), `small` after 18 minutes of charging
    // (50 → 80 % at 100 mA into 100 mAh), `low` after about two and a half hours (20 → 80 % at 1000 mA into 4080 mAh).
    assert_eq!(calls[..3], ["-l 1-1 -p 1 -a off", "-l 1-1 -p 3 -a off", "-l 1-1 -p 2 -a off"], "{calls:?}");
    // Care stops: the ports it had cut, in device order.
    assert_eq!(calls[calls.len() - 3..], ["-l 1-1 -p 1 -a on", "-l 1-1 -p 2 -a on", "-l 1-1 -p 3 -a on"]);
    for p in 1..=4 {
        assert!(hubs.powered("1-1", p), "port {p} left off: {calls:?}");
    }

    // The last reading of each phone is inside its window (the upper limit overshot by
    // at most what a minute of charging adds).
    for device in ["full", "low", "small"] {
        let last: Vec<f64> = lab.sql(&format!(
            "SELECT battery_pct FROM battery_readings WHERE device = '{device}' ORDER BY at DESC, rowid DESC LIMIT 1"
        ));
        assert!(last.len() == 1 && (40.0..=81.7).contains(&last[0]), "{device}: {last:?}\n{stdout}");
    }
    // `low` charged from 20 % to the limit: readings on the way, the cut at or just over 80.
    let low: Vec<f64> = lab.sql("SELECT battery_pct FROM battery_readings WHERE device = 'low' ORDER BY at, rowid");
    assert!(low[0] <= 21.0 && low.iter().any(|l| (80.0..81.7).contains(l)), "{low:?}");
    let health: Vec<f64> = lab.sql("SELECT health_pct FROM battery_readings WHERE device = 'full'");
    assert!(!health.is_empty() && health.iter().all(|h| *h == 92.0), "{health:?}");
    assert!(stdout.contains("full: port 1-1:1 on again (care stopped)"), "{stdout}");
}

#[test]
fn once_is_one_pass_and_simulated_phones_need_a_bound() {
    let lab = lab();
    let hubs = Hubs::new(&hub());
    let out = lab.cmd(&["care", "--once", "--device", "full", "--device", "low"]).envs(hubs.env()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let calls: Vec<String> = hubs.calls().into_iter().map(|(args, _)| args).collect();
    let calls = common::uhubctl::switches_with_their_listings(&calls);
    assert_eq!(calls, ["-l 1-1 -p 1 -a off", "-l 1-1 -p 1 -a on"], "one pass: `full` cut, on again at the end");
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM battery_readings"), [2]);

    let unbounded = lab.cmd(&["care"]).envs(hubs.env()).output().unwrap();
    assert_eq!(unbounded.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unbounded.stderr).contains("fix: add `--for 3d`"));
    let unknown = lab.cmd(&["care", "--once", "--device", "nope"]).envs(hubs.env()).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2));
}

/// Readings of three weeks, as `lab care` stores them: `full` loses health fast (92 → 88 %
/// in 21 days) and gains a cycle a day; `low` is slow to age; `small` was read at 100 % for
/// the last 36 hours (a phone left on a charger).
fn seed_readings(lab: &TempLab) {
    use lab::store::{BatteryReadingRow, Store};
    let store = Store::open(&lab.store()).unwrap();
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-11-01T08:00:00Z").unwrap().with_timezone(&chrono::Utc);
    let at = |hours: i64| (t0 + chrono::Duration::hours(hours)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    for day in 0..=21i64 {
        let add = |device: &str, level: f64, health: Option<f64>, cycles: Option<u32>, hours: i64| {
            let row = BatteryReadingRow {
                device: device.into(),
                at: at(hours),
                battery_pct: Some(level),
                health_pct: health,
                cycle_count: cycles,
                source: "sim".into(),
            };
            store.add_battery_reading(&row).unwrap();
        };
        add("full", 60.0, Some(92.0 - day as f64 * 4.0 / 21.0), Some(310 + day as u32), day * 24);
        add("low", 70.0, Some(97.0 - day as f64 * 0.5 / 21.0), Some(120 + (day / 3) as u32), day * 24);
    }
    for h in (0..=36).step_by(6) {
        let row = BatteryReadingRow {
            device: "small".into(),
            at: at(21 * 24 - 36 + h),
            battery_pct: Some(100.0),
            health_pct: None,
            cycle_count: None,
            source: "android".into(),
        };
        store.add_battery_reading(&row).unwrap();
    }
}

#[test]
fn status_shows_health_and_cycles_with_their_trend_and_warns() {
    let lab = lab();
    seed_readings(&lab);
    let out = lab.cmd(&["status"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap().replace(&lab.dir.path().display().to_string(), "<tmp>");
    let start = text.find("\nbatteries").expect(&text);
    let section: String =
        text[start..].lines().take_while(|l| !l.starts_with("no campaigns")).collect::<Vec<_>>().join("\n");
    insta::assert_snapshot!("status_batteries", section);
    assert!(section.contains("warning: full: battery health falls 5.7 points per 30 days"), "{section}");
    assert!(section.contains("warning: small: at 100 % for 36h 00m on end"), "{section}");
    assert!(!section.contains("warning: low"), "{section}");

    let json = lab.cmd(&["status", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    let full = &v["batteries"]["devices"][0];
    assert_eq!(full["device"], "full");
    let per_30d = full["summary"]["health_per_30d"].as_f64().unwrap();
    assert!((per_30d + 4.0 * 30.0 / 21.0).abs() < 1e-6, "{per_30d}");
    assert_eq!(full["summary"]["cycle_count"], 331);
}

#[test]
fn sigterm_stops_care_in_real_time_and_its_cut_port_is_on_again() {
    // With a device that is not simulated among them, care runs in real time.
    let lab = TempLab::from_text(
        "[lab]\nname = \"care-rt\"\n\n[[device]]\nname = \"full\"\nplatform = \"sim\"\nmodel = \"Pixel 5\"\n\
         tether = { uhubctl = { location = \"1-1\", port = 1 } }\n[device.sim]\nemulates = \"android\"\nbattery_start_pct = 95\n\n\
         [[device]]\nname = \"this-host\"\nplatform = \"host\"\nmodel = \"local machine\"\n",
    );
    let hubs = Hubs::new(&hub());
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_lab"))
        .arg("--lab")
        .arg(&lab.lab)
        .arg("care")
        .envs(hubs.env())
        .env_remove("LAB_CONFIG")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the cut (the first pass), then stop it as a service manager would.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // Until the cut is done: the listing, the off, the listing after it.
    while hubs.calls().len() < 3 {
        assert!(std::time::Instant::now() < deadline, "care never switched the port");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    sigterm(child.id());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("this-host: skipped: tether `none`"), "{stdout}");
    let calls: Vec<String> = hubs.calls().into_iter().map(|(args, _)| args).collect();
    let calls = common::uhubctl::switches_with_their_listings(&calls);
    assert_eq!(calls, ["-l 1-1 -p 1 -a off", "-l 1-1 -p 1 -a on"]);
    assert!(hubs.powered("1-1", 1));
}

fn sigterm(pid: u32) {
    let status = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
    assert!(status.success());
}

#[test]
fn every_campaign_run_stores_each_phones_battery_health_for_the_trend() {
    let lab = lab();
    let rb = lab.dir.path().join("one.toml");
    std::fs::write(
        &rb,
        "name = \"one\"\nduration = \"10m\"\nrepeats = 1\ndevices = [\"loose\"]\n\
         [builds.app]\nbaseline = true\n[builds.app.sim]\ncpu_pct = 5\nwakeups_per_s = 5\nmemory_mb = 20\n",
    )
    .unwrap();
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<String> = lab.sql(
        "SELECT device || ' ' || COALESCE(battery_pct, '-') || ' ' || health_pct || ' ' || cycle_count || ' ' || source FROM battery_readings",
    );
    assert_eq!(rows, ["loose - 100.0 0 sim"], "one reading when the campaign started, with no level");
}

/// Holds `device`'s lease in this process, as a running campaign `c-held` would.
fn hold(lab: &TempLab, device: &str) -> lab::store::DeviceLease {
    let req = lab::store::LeaseRequest {
        purpose: "campaign".into(),
        campaign: Some("c-held".into()),
        runbook: Some("audit".into()),
        host: "bench-1".into(),
        ..Default::default()
    };
    lab.hold(device, &req)
}

#[test]
fn care_never_switches_the_port_of_a_phone_another_holds() {
    let lab = lab();
    let hubs = Hubs::new(&hub());
    let held = hold(&lab, "full");
    let out = lab.cmd(&["care", "--once", "--device", "full", "--device", "low"]).envs(hubs.env()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("full: left alone: held by campaign c-held (runbook audit) on bench-1"), "{stdout}");
    let calls: Vec<String> = hubs.calls().into_iter().map(|(args, _)| args).collect();
    assert!(!calls.iter().any(|c| c.starts_with("-l 1-1 -p 1")), "care switched the held phone's port: {calls:?}");

    // Let go, `full` (85 %) is care's again: cut, and on again when care stops.
    drop(held);
    let out = lab.cmd(&["care", "--once", "--device", "full"]).envs(hubs.env()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let calls: Vec<String> = hubs.calls().into_iter().map(|(args, _)| args).collect();
    let switches = common::uhubctl::switches_with_their_listings(&calls);
    assert_eq!(switches, ["-l 1-1 -p 1 -a off", "-l 1-1 -p 1 -a on"], "{calls:?}");
    assert!(lab.sql::<String>("SELECT device FROM port_cuts").is_empty(), "a port on again is not a cut");
}
