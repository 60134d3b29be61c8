//! Every real capture in tests/fixtures/devices/ parses, and every value of its
//! `.expected.toml` (what the source project's own tests assert) matches. A key of an
//! expectation file that no check knows fails the test, so no value goes unchecked.

use std::path::PathBuf;

use lab::collect::android::battery::FieldValue;
use lab::collect::{
    android::adb_devices, android::battery as android_battery, android::batterystats_checkin, android::cpuinfo,
    android::dumpsys_wifi, android::history_text, android::wifi_status, ios::battery as ios_battery,
    linux::power_supply,
};
use toml::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/devices")
}

fn data(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn text(name: &str) -> String {
    String::from_utf8(data(name)).unwrap()
}

fn expected(name: &str) -> toml::Table {
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    let path = format!("{stem}.expected.toml");
    text(&path).parse::<toml::Table>().unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Compares an expected value with the parsed one; floats to 1e-9 relative.
fn same(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Float(e), Value::Float(a)) => (e - a).abs() <= 1e-9 * e.abs().max(1.0),
        (Value::Float(e), Value::Integer(a)) | (Value::Integer(a), Value::Float(e)) => (*a as f64 - e).abs() < 1e-9,
        (Value::Array(e), Value::Array(a)) => e.len() == a.len() && e.iter().zip(a).all(|(x, y)| same(x, y)),
        _ => expected == actual,
    }
}

/// Checks every key of `table` against `actual(key)`; counts the checked leaves.
fn check(file: &str, section: &str, table: &toml::Table, actual: impl Fn(&str) -> Option<Value>) -> usize {
    let mut n = 0;
    for (key, want) in table {
        let got = actual(key).unwrap_or_else(|| panic!("{file} [{section}] {key}: no check knows this key"));
        assert!(same(want, &got), "{file} [{section}] {key}: expected {want:?}, parsed {got:?}");
        n += 1;
    }
    n
}

fn sub<'a>(t: &'a toml::Table, key: &str) -> &'a toml::Table {
    t.get(key).and_then(Value::as_table).unwrap_or_else(|| panic!("no [{key}] table"))
}

fn int(v: impl TryInto<i64>) -> Option<Value> {
    v.try_into().ok().map(Value::Integer)
}

#[test]
fn dumpsys_battery_emulator() {
    let file = "android/battery_adbts_emulator.txt";
    let want = expected(file);
    let b = android_battery::parse(&text(file)).unwrap();
    let n = check(file, "", &want, |k| {
        b.field(k).map(|v| match v {
            FieldValue::Bool(x) => Value::Boolean(*x),
            FieldValue::Int(x) => Value::Integer(*x),
            FieldValue::Float(x) => Value::Float(*x),
            FieldValue::Text(s) => Value::String(s.clone()),
        })
    });
    // "exactly these 14 entries"
    assert_eq!((n, b.fields.len()), (14, 14));
    // The typed view agrees with the raw map and applies the units.
    assert_eq!(
        (b.level_pct, b.temperature_c, b.voltage_mv, b.charge_counter_uah),
        (100.0, Some(25.0), Some(5000), Some(10000))
    );
    assert_eq!(b.status, Some(android_battery::ChargeStatus::NotCharging));
    assert!(b.powered_by.is_empty());
}

#[test]
fn batterystats_checkin_v36() {
    let file = "android/batterystats_checkin_v36_perfetto.txt";
    let want = expected(file);
    let c = batterystats_checkin::parse(&text(file)).unwrap();
    assert_eq!(c.checkin_version(), Some(36));
    assert_eq!(c.version.as_ref().unwrap().parcel, Some(214));
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let h = &c.history;
    assert_eq!((h.string_pool.len(), h.records, h.clock_known), (4, 12, true));
    let mut checked = 0;
    for (section, table) in &want {
        let table = table.as_table().unwrap();
        checked += match section.as_str() {
            "screen_state" => {
                assert_eq!(h.screen.len(), 1, "exactly one ScreenState row");
                check(file, section, table, |k| match k {
                    "ts_ns" => int(h.screen[0].ts_ms * 1_000_000),
                    "value" => Some(Value::Float(h.screen[0].value)),
                    _ => None,
                })
            }
            "wakelocks" => {
                // Completed slices only: the bare `+w` of the first record names no lock.
                let slices: Vec<Value> = h
                    .sorted_wakelocks()
                    .into_iter()
                    .filter_map(|s| {
                        let dur = s.dur_ms?;
                        Some(Value::Array(vec![
                            Value::Integer(s.start_ms * 1_000_000),
                            Value::String(s.name.clone()),
                            Value::Integer(dur * 1_000_000),
                        ]))
                    })
                    .collect();
                check(file, section, table, |k| match k {
                    "slice_count" => int(slices.len() as i64),
                    "slices" => Some(Value::Array(slices.clone())),
                    _ => None,
                })
            }
            other => panic!("{file}: no check knows [{other}]"),
        };
    }
    assert_eq!(checked, 4);
    assert_eq!(h.wakelocks[1].uid, Some(1001));
}

#[test]
fn batterystats_history_text_without_discharge() {
    let file = "android/batterystats_history_text_loganalysis_nodischarge.txt";
    let want = expected(file);
    let h = history_text::parse(&text(file)).unwrap();
    assert_eq!((h.records, h.reset_time.as_deref()), (1, Some("2014-12-09-11-33-29")));
    assert_eq!(h.discharge, history_text::DischargeSummary::NoDischarge);
    let n = check(file, "", &want, |k| match k {
        "battery_discharge_rate" => Some(Value::String(h.discharge.rate_text())),
        "peak_discharge_time" => Some(Value::String(h.discharge.peak_text())),
        _ => None,
    });
    assert_eq!(n, 2);
}

#[test]
fn cpuinfo_single_line() {
    let file = "android/cpuinfo_loganalysis_single.txt";
    let want = expected(file);
    let c = cpuinfo::parse(&text(file)).unwrap();
    let mut n = check(
        file,
        "",
        &toml::Table::from_iter(want.iter().filter(|(_, v)| !v.is_table()).map(|(k, v)| (k.clone(), v.clone()))),
        |k| match k {
            "process_count" => int(c.processes.len() as i64),
            _ => None,
        },
    );
    for (pid, table) in sub(&want, "pid") {
        let p = c.process(pid.parse().unwrap()).unwrap_or_else(|| panic!("no pid {pid}"));
        n += check(file, &format!("pid.{pid}"), table.as_table().unwrap(), |k| match k {
            "name" => Some(Value::String(p.name.clone())),
            "total_percent" => Some(Value::Float(p.total_pct)),
            _ => None,
        });
    }
    assert_eq!(n, 3);
    assert_eq!((c.processes[0].user_pct, c.processes[0].kernel_pct), (Some(0.0), Some(0.0)));
}

#[test]
fn dumpsys_wifi_without_events() {
    let file = "android/dumpsys_wifi_loganalysis_noevents.txt";
    let want = expected(file);
    let w = dumpsys_wifi::parse(&text(file)).unwrap();
    assert!(w.enabled);
    let n = check(file, "", &want, |k| match k {
        "num_wifi_disconnects" => int(w.disconnects as i64),
        "num_wifi_scans" => int(w.scans as i64),
        "num_wifi_associations" => int(w.associations as i64),
        _ => None,
    });
    assert_eq!(n, 3);
}

#[test]
fn cmd_wifi_status() {
    let file = "android/wifi_status_tradefed.txt";
    assert!(!text(file).ends_with('\n'), "the fixture keeps the source's missing final newline");
    let want = expected(file);
    let w = wifi_status::parse(&text(file)).unwrap();
    assert_eq!((w.enabled, w.connected), (Some(true), Some(true)));
    let i = w.info.as_ref().unwrap();
    let s = |v: &Option<String>| v.clone().map(Value::String);
    let n = check(file, "", &want, |k| match k {
        "ssid" => s(&i.ssid),
        "bssid" => s(&i.bssid),
        "link_speed_mbps" => i.link_speed_mbps.map(Value::Integer),
        "rssi_dbm" => i.rssi_dbm.map(Value::Integer),
        "mac_address" => s(&i.mac_address),
        "net_id" => i.net_id.map(Value::Integer),
        _ => None,
    });
    assert_eq!(n, 6);
    assert_eq!(w.counters.get("successfulRxPackets"), Some(&414010.0));
}

#[test]
fn ios_applesmartbattery() {
    let file = "ios/applesmartbattery_iphonestatus.plist";
    let want = expected(file);
    let r = ios_battery::parse(&data(file)).unwrap();
    let s = |v: &Option<String>| v.clone().map(Value::String);
    let b = |v: Option<bool>| v.map(Value::Boolean);
    let i = |v: Option<i64>| v.map(Value::Integer);
    let mut n = check(file, "ioregistry", sub(&want, "ioregistry"), |k| match k {
        "cycle_count" => i(r.cycle_count),
        "voltage_mv" => i(r.voltage_mv),
        "amperage_ma" => i(r.amperage_ma),
        "is_charging" => b(r.is_charging),
        "serial" => s(&r.serial),
        "adapter_watts" => i(r.adapter_watts),
        "adapter_description" => s(&r.adapter_description),
        "avg_time_to_empty_min" => i(r.avg_time_to_empty_min),
        "fully_charged" => b(r.fully_charged),
        "at_critical_level" => b(r.at_critical_level),
        "nominal_charge_capacity_mah" => i(r.nominal_charge_capacity_mah),
        "full_charge_capacity_mah" => i(r.full_charge_capacity_mah),
        _ => None,
    });
    n += check(file, "derived", sub(&want, "derived"), |k| match k {
        // iOS Settings shows the rounded value.
        "health_percent" => r.health_pct.map(|h| Value::Integer(h.round() as i64)),
        "cell_id" => s(&r.cell_id),
        "design_capacity_mah" => i(r.design_capacity_mah),
        "voltage_volts" => r.voltage_v().map(Value::Float),
        _ => None,
    });
    assert_eq!(n, 16);
    assert_eq!(r.voltage_source, Some("Voltage"));
    assert_eq!(r.status, None);
}

#[test]
fn ios_iopmpowersource_diagnostics_reply() {
    let file = "ios/ioregistry_iopmpowersource_goios.plist";
    let want = expected(file);
    let r = ios_battery::parse(&data(file)).unwrap();
    let top: toml::Table = want.iter().filter(|(_, v)| !v.is_table()).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut n = check(file, "", &top, |k| match k {
        "status" => r.status.clone().map(Value::String),
        _ => None,
    });
    let reg = sub(&want, "ioregistry");
    // "exactly these 5 keys"
    assert_eq!(r.registry.len(), reg.len(), "{:?}", r.registry.keys());
    n += check(file, "ioregistry", reg, |k| {
        r.registry.get(k).map(|v| match v {
            serde_json::Value::Bool(b) => Value::Boolean(*b),
            serde_json::Value::Number(x) => Value::Integer(x.as_i64().expect("integer")),
            other => Value::String(other.to_string()),
        })
    });
    assert_eq!(n, 6);
    // The typed view applies the units.
    assert_eq!(
        (r.level_pct, r.temperature_c, r.voltage_mv, r.cycle_count),
        (Some(85.0), Some(30.0), Some(4269), Some(321))
    );
}

#[test]
fn android_power_supply_uevent() {
    let file = "android/power_supply_uevent_thali_xt1072.txt";
    let want = expected(file);
    let r = power_supply::parse(&text(file)).unwrap();
    let i = |v: Option<i64>| v.map(Value::Integer);
    let n = check(file, "", &want, |k| match k {
        "properties" => i(Some(r.properties.len() as i64)),
        "cycle_count" => i(r.cycle_count.map(i64::from)),
        "charge_full_uah" => i(r.charge_full_uah),
        "charge_full_design_uah" => i(r.charge_full_design_uah),
        "capacity_pct" => i(r.capacity_pct.map(|c| c as i64)),
        "health_percent" => r.health_pct().map(|h| Value::Float((h * 100.0).round() / 100.0)),
        _ => None,
    });
    assert_eq!(n, 6);
    // What `lab care` stores for an Android phone.
    let h = lab::device::BatteryHealth::from_power_supply(&r, "uevent");
    assert_eq!((h.cycle_count, h.health_pct.map(|x| (x * 100.0).round() / 100.0)), (Some(0), Some(99.87)));
}

#[test]
fn ios_battery_health_for_care() {
    let r = ios_battery::parse(&data("ios/applesmartbattery_iphonestatus.plist")).unwrap();
    let h = lab::device::BatteryHealth::from_ios(&r);
    assert_eq!((h.health_pct, h.cycle_count.map(i64::from)), (r.health_pct, r.cycle_count));
    assert!(h.health_pct.is_some() && h.cycle_count.is_some());
}

/// `adb devices -l` with an emulator and a USB Nexus 7 (appium-adb's test string).
#[test]
fn adb_devices_l_appium() {
    let file = "android/adb_devices_l_appium.txt";
    let want = expected(file);
    let got = adb_devices::parse(&text(file));
    let mut n = check(
        file,
        "",
        &toml::Table::from_iter(want.iter().filter(|(k, _)| *k == "device_count").map(|(k, v)| (k.clone(), v.clone()))),
        |k| match k {
            "device_count" => int(got.len() as i64),
            _ => None,
        },
    );
    let devices = want["devices"].as_array().unwrap();
    for (i, d) in devices.iter().enumerate() {
        let e = &got[i];
        n += check(file, &format!("devices[{i}]"), d.as_table().unwrap(), |k| {
            let s = |v: &Option<String>| v.clone().map(Value::String);
            match k {
                "udid" => Some(Value::String(e.serial.clone())),
                "state" => (e.state == adb_devices::AdbState::Device).then(|| Value::String("device".into())),
                "usb" => s(&e.usb),
                "product" => s(&e.product),
                "model" => s(&e.model),
                "device" => s(&e.device),
                _ => None,
            }
        });
        // A field the expectation leaves out is not there (no usb for the emulator).
        if !d.as_table().unwrap().contains_key("usb") {
            assert_eq!(e.usb, None, "{file} devices[{i}]");
        }
    }
    assert_eq!(n, 1 + 5 + 6);
}
