//! `lab care` on an Android phone through the real binary, Debian's real adb and the
//! stand-ins for the phone (standins/adb-phone) and its hub (standins/uhubctl, whose
//! `on_vbus` hook tells the phone when its charger goes): the level read over adb, the
//! port cut, health and cycles read from the battery's power-supply uevent and stored.

use crate::common;

use common::adb::*;
use common::standin;
use common::uhubctl::Hubs;
use serde_json::json;

#[test_needs::needs(adb)]
#[test]
fn care_reads_an_android_phone_over_adb_cuts_its_port_and_stores_its_health() {
    let (adb, phone, dir) = setup(&["--auth", "accept"]);
    let root = root(&dir);
    edit_state(&root, |s| {
        let cap = s["battery"]["capacity_uah"].as_f64().unwrap();
        s["battery"]["charge_uah"] = json!(cap * 0.9);
        s["battery"]["power"] = json!("usb");
    });
    // The battery's uevent, a real capture (tests/fixtures/devices/SOURCES.md).
    let uevent = root.join("fs/sys/class/power_supply/battery/uevent");
    std::fs::create_dir_all(uevent.parent().unwrap()).unwrap();
    std::fs::copy(common::root().join("tests/fixtures/devices/android/power_supply_uevent_thali_xt1072.txt"), &uevent)
        .unwrap();
    let hubs = Hubs::new(&json!({ "hubs": [
        { "location": "1-1", "id": "2109:2817", "usb": "2.10", "switching": "ppps", "ports": [{}, { "device": {
            "id": "18d1:4ee7", "vendor": "Google", "product": "Pixel 5", "serial": "0A1B2C3D",
            "on_vbus": [standin("adb-phone"), "power", root.display().to_string()] } }] }
    ]}));
    let lab = android_lab("care", &adb, &phone, r#"{ uhubctl = { location = "1-1", port = 2 } }"#, "");

    let out = lab.cmd(&["care", "--once", "-v"]).envs(hubs.env()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("pixel-1: 90.0 %, on USB power, health 100 %, 0 cycles"), "{stdout}");
    let calls: Vec<String> = hubs.calls().into_iter().map(|(args, _)| args).collect();
    let calls = common::uhubctl::switches_with_their_listings(&calls);
    assert_eq!(calls, ["-l 1-1 -p 2 -a off", "-l 1-1 -p 2 -a on"], "cut at 90 %, on again when care stopped");
    assert_eq!(state(&root)["battery"]["power"], "usb", "the hub gave the phone its charger back");

    let levels: Vec<f64> = lab.sql("SELECT battery_pct FROM battery_readings WHERE device = 'pixel-1'");
    assert_eq!(levels, [90.0]);
    let health: Vec<f64> = lab.sql("SELECT health_pct FROM battery_readings");
    assert!((health[0] - 100.0 * 2_363_000.0 / 2_366_000.0).abs() < 1e-9, "{health:?}");
    assert_eq!(lab.sql::<i64>("SELECT cycle_count FROM battery_readings"), [0]);
    assert_eq!(lab.sql::<String>("SELECT source FROM battery_readings"), ["/sys/class/power_supply/battery/uevent"]);
}
