//! The powerlog reader on databases built from the real iOS 15 schema
//! (tests/fixtures/devices/ios/powerlog_core_schema.sql, from plaso's test file) with rows of
//! our own: wall time through the time-offset rows, the unplugged stretch, charging inside
//! a soak, charge and energy from the raw capacity, evidence, Apple's node estimates; an
//! older column set; and what is not a readable powerlog. Then `lab import ios-powerlog`.

use crate::common;

use std::path::{Path, PathBuf};

use common::{TempLab, root};
use lab::collect::ios::powerlog;

fn schema() -> String {
    std::fs::read_to_string(root().join("tests/fixtures/devices/ios/powerlog_core_schema.sql")).unwrap()
}

/// Powerlog clock 1 000 000 s; the first offset row says wall = powerlog + 3600, a clock
/// change at powerlog 1 003 000 makes it + 3660.
const T0: f64 = 1_000_000.0;

/// One battery row: (powerlog seconds, level, charging, external power, raw mAh, mV).
type Row = (f64, f64, bool, bool, i64, i64);

/// A soak from T0+1000 to T0+4600 (unplugged at T0+900, plugged back at T0+4700).
fn rows(charge_inside: bool) -> Vec<Row> {
    let mut r = vec![
        (T0, 100.0, false, true, 2800, 4350),
        (T0 + 900.0, 100.0, false, false, 2800, 4340),
        (T0 + 1000.0, 99.0, false, false, 2790, 4300),
        (T0 + 2000.0, 96.0, false, false, 2710, 4200),
    ];
    if charge_inside {
        r.push((T0 + 2500.0, 96.0, true, true, 2710, 4250));
        r.push((T0 + 2800.0, 97.0, false, false, 2730, 4200));
    }
    r.extend([(T0 + 3500.0, 93.0, false, false, 2630, 4100), (T0 + 4600.0, 90.0, false, false, 2550, 4000)]);
    r.push((T0 + 4700.0, 90.0, true, true, 2550, 4300));
    r
}

fn build(path: &Path, ddl: &str, battery: &[Row], full_columns: bool) {
    let c = rusqlite::Connection::open(path).unwrap();
    // Real powerlogs are WAL-mode files.
    let _: String = c.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).unwrap();
    c.execute_batch(ddl).unwrap();
    c.execute_batch(&format!(
        "INSERT INTO PLStorageOperator_EventForward_TimeOffset (timestamp, system) VALUES ({T0}, 3600), ({}, 3660);",
        T0 + 3000.0
    ))
    .unwrap();
    for (t, level, charging, ext, mah, mv) in battery {
        if full_columns {
            c.execute(
                "INSERT INTO PLBatteryAgent_EventBackward_Battery
                   (timestamp, Level, IsCharging, ExternalConnected, AppleRawCurrentCapacity, Voltage)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params![t, level, *charging as i64, *ext as i64, mah, mv],
            )
            .unwrap();
        } else {
            c.execute(
                "INSERT INTO PLBatteryAgent_EventBackward_Battery (timestamp, Level, IsCharging, ExternalConnected)
                 VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![t, level, *charging as i64, *ext as i64],
            )
            .unwrap();
        }
    }
    if full_columns {
        c.execute_batch(&format!(
            "INSERT INTO PLDisplayAgent_EventForward_Display (timestamp, Brightness) VALUES ({}, 0.5), ({}, 0.75);
             INSERT INTO PLBluetoothAgent_EventForward_DeviceState (timestamp, DevicePowered) VALUES ({}, 0);
             INSERT INTO PLAccountingOperator_EventNone_Nodes (ID, timestamp, Name) VALUES (7, {T0}, 'io.envoyproxy.app'), (9, {T0}, 'Display');
             INSERT INTO PLAccountingOperator_Aggregate_RootNodeEnergy (timestamp, timeInterval, Energy, NodeID, RootNodeID)
               VALUES ({}, 3600, 120, 7, 1), ({}, 3600, 30, 7, 1), ({}, 3600, 500, 9, 1), ({}, 3600, 999, 7, 1);",
            T0 + 500.0,
            T0 + 2000.0,
            T0 + 500.0,
            T0 + 1500.0,
            T0 + 2600.0,
            T0 + 2600.0,
            T0 + 9000.0,
        ))
        .unwrap();
    }
    // Checkpoint the WAL into the main file, as the phone's own copy would be.
    let _: i64 = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0)).unwrap();
}

fn db(dir: &Path, name: &str, battery: &[Row], full: bool) -> PathBuf {
    let path = dir.join(name);
    build(&path, &schema(), battery, full);
    path
}

/// Powerlog seconds to wall seconds under the test's two offsets.
fn wall(t: f64) -> f64 {
    t + if t >= T0 + 3000.0 { 3660.0 } else { 3600.0 }
}

#[test]
fn the_schema_is_the_real_one() {
    let c = rusqlite::Connection::open_in_memory().unwrap();
    c.execute_batch(&schema()).unwrap();
    let n: i64 = c
        .query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'PL%'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 14);
    let cols: i64 = c
        .query_row("SELECT COUNT(*) FROM pragma_table_info('PLBatteryAgent_EventBackward_Battery')", [], |r| r.get(0))
        .unwrap();
    assert_eq!(cols, 84, "as powerlog_core_schema.expected.toml says");
}

#[test]
fn a_soak_off_power_reads_in_wall_time_with_charge_energy_and_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(db(dir.path(), "p.PLSQL", &rows(false), true)).unwrap();
    assert_eq!(&bytes[18..20], [2, 2], "the file is in WAL mode");
    let log = powerlog::parse(&bytes).unwrap();
    assert_eq!(log.time_offsets, 2);
    assert_eq!(log.battery.len(), 7);
    // The clock change is applied from its row on, not to the whole file.
    assert_eq!(log.battery[1].t, wall(T0 + 900.0));
    assert_eq!(log.battery[5].t, wall(T0 + 4600.0));
    assert_eq!(log.last_unplugged(), Some((wall(T0 + 900.0), wall(T0 + 4700.0))));

    let (from, to) = (wall(T0 + 1000.0), wall(T0 + 4600.0));
    let s = log.soak(from, to);
    assert_eq!(s.charging_s, 0.0);
    assert_eq!(s.unplugged, Some((wall(T0 + 900.0), wall(T0 + 4700.0))));
    assert_eq!((s.level_start_pct, s.level_end_pct), (Some(99.0), Some(90.0)));
    assert_eq!(s.charge_used_mah, Some(240.0), "2790 − 2550 mAh of raw capacity");
    // Mean voltage of the rows at the start and inside: (4300 + 4200 + 4100 + 4000) / 4 = 4150 mV.
    let e = s.energy_j.unwrap();
    assert!((e - 240.0 * 4.15 * 3.6).abs() < 1e-9, "{e}");
    assert_eq!(s.series.first(), Some(&(0.0, 99.0)));
    assert_eq!(s.series.last(), Some(&(to - from, 90.0)));
    assert_eq!(s.brightness, [0.5, 0.75], "in force at the start, then changed inside");
    assert_eq!(s.bluetooth_on, Some(false));
    assert_eq!(s.node_energy.get("io.envoyproxy.app"), Some(&150.0), "two estimates inside, one after the soak");
    assert_eq!(s.node_energy.get("Display"), Some(&500.0));
}

#[test]
fn charging_inside_the_soak_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let log = powerlog::parse(&std::fs::read(db(dir.path(), "p.PLSQL", &rows(true), true)).unwrap()).unwrap();
    let s = log.soak(wall(T0 + 1000.0), wall(T0 + 4600.0));
    assert_eq!(s.charging_s, 300.0, "plugged from +2500 to +2800");
    assert_eq!(log.last_unplugged(), Some((wall(T0 + 2800.0), wall(T0 + 4700.0))), "the stretch after the plug-in");
}

#[test]
fn an_older_column_set_reads_without_raw_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let full = schema();
    let reduced = full.lines().map(|l| {
        if l.starts_with("CREATE TABLE 'PLBatteryAgent_EventBackward_Battery'") {
            "CREATE TABLE 'PLBatteryAgent_EventBackward_Battery' ('ID' INTEGER PRIMARY KEY AUTOINCREMENT, 'timestamp' REAL, 'Level' REAL, 'IsCharging' INTEGER, 'ExternalConnected' INTEGER);".to_string()
        } else {
            l.to_string()
        }
    });
    let path = dir.path().join("old.PLSQL");
    build(&path, &reduced.collect::<Vec<_>>().join("\n"), &rows(false), false);
    let log = powerlog::parse(&std::fs::read(&path).unwrap()).unwrap();
    let s = log.soak(wall(T0 + 1000.0), wall(T0 + 4600.0));
    assert_eq!((s.charge_used_mah, s.energy_j), (None, None));
    assert_eq!((s.level_start_pct, s.level_end_pct, s.charging_s), (Some(99.0), Some(90.0), 0.0));
}

#[test]
fn what_is_not_a_readable_powerlog_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let empty = std::fs::read(db(dir.path(), "empty.PLSQL", &[], true)).unwrap();
    assert!(powerlog::parse(&empty).unwrap_err().to_string().contains("has no rows"));
    let full = std::fs::read(db(dir.path(), "p.PLSQL", &rows(false), true)).unwrap();
    let truncated = &full[..full.len() / 2];
    let e = powerlog::parse(truncated).unwrap_err().to_string();
    assert!(e.contains("truncated or corrupt"), "{e}");
    let e = powerlog::parse(b"PK\x03\x04 a zip, not a database").unwrap_err().to_string();
    assert!(e.contains("not a SQLite database"), "{e}");
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x);").unwrap();
    let e = powerlog::parse(&std::fs::read(&other).unwrap()).unwrap_err().to_string();
    assert!(e.contains("no PLBatteryAgent_EventBackward_Battery table"), "{e}");
}

#[test]
fn lab_import_reads_the_last_unplugged_stretch_as_the_soak() {
    let lab = TempLab::new();
    let path = db(lab.dir.path(), "powerlog_2026-12-01_10-00_ABCDEF01.PLSQL", &rows(false), true);
    let out = lab.cmd(&["import", "ios-powerlog", path.to_str().unwrap(), "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let metric = |name: &str| {
        v["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == name).unwrap_or_else(|| panic!("{name}: {v}"))
            ["value"]
            .as_f64()
            .unwrap()
    };
    // The stretch from the unplug (+900) to the plug-in (+4700): 100 → 90 %, 2800 → 2550 mAh.
    assert_eq!(metric("battery_drop_pct"), 10.0);
    assert_eq!(metric("charge_used_mah"), 250.0);
    assert_eq!(v["parsed"]["soak"]["charging_s"], 0.0);

    let bad = lab.dir.path().join("broken.PLSQL");
    std::fs::write(&bad, b"SQLite format 3\0 but nothing after").unwrap();
    let out = lab.cmd(&["import", "ios-powerlog", bad.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("broken.PLSQL") && err.contains("fix:"), "{err}");
}

/// A gzipped tar with `files` (path in the archive, bytes).
fn targz(path: &Path, files: &[(&str, Vec<u8>)]) {
    let gz = flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (name, bytes) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, name, bytes.as_slice()).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut e, bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn lab_import_takes_the_newest_powerlog_out_of_a_sysdiagnose_and_nothing_else() {
    let lab = TempLab::new();
    let dir = lab.dir.path();
    let older = std::fs::read(db(dir, "a.PLSQL", &rows(true), true)).unwrap();
    let newest = std::fs::read(db(dir, "b.PLSQL", &rows(false), true)).unwrap();
    let top = "sysdiagnose_2026.12.01_10-00-00+0000_iPhone-OS_iPhone_21A329";
    let archive = dir.join("sysdiagnose.tar.gz");
    targz(
        &archive,
        &[
            (&format!("{top}/logs/powerlogs/powerlog_2026-12-01_08-00_0A1B2C3D.PLSQL.gz"), gzip(&older)),
            (&format!("{top}/logs/powerlogs/powerlog_2026-12-01_09-00_1B2C3D4E.PLSQL"), newest),
            (&format!("{top}/logs/SystemVersion.plist"), b"<plist/>".to_vec()),
        ],
    );
    let out = lab.cmd(&["import", "ios-sysdiagnose", archive.to_str().unwrap(), "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let logs: Vec<&str> = v["parsed"]["powerlogs"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert!(logs[0].ends_with("08-00_0A1B2C3D.PLSQL.gz") && logs[1].ends_with("09-00_1B2C3D4E.PLSQL"));
    // The newest (no charging): its stretch from +900 to +4700.
    assert_eq!(v["parsed"]["soak"]["charging_s"], 0.0);
    assert_eq!(v["parsed"]["soak"]["from"], wall(T0 + 900.0));

    // The gzipped one reads the same as it was.
    let f = lab::collect::ios::sysdiagnose::powerlogs(std::fs::File::open(&archive).unwrap()).unwrap();
    assert_eq!(f[0].bytes, older);

    let none = dir.join("none.tar.gz");
    targz(&none, &[(&format!("{top}/logs/SystemVersion.plist"), b"<plist/>".to_vec())]);
    let out = lab.cmd(&["import", "ios-sysdiagnose", none.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no logs/powerlogs/*.PLSQL in the archive"), "{err}");
}

#[test]
fn a_simulated_iphone_leaves_a_powerlog_that_reads_as_its_trial_measured() {
    let lab = TempLab::new();
    let out = lab.cmd(&["run", "runbooks/quickstart.toml"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<String> = lab.sql(
        "SELECT a.artifact_dir || '|' || m.value FROM attempts a
         JOIN trials t ON t.campaign = a.campaign AND t.idx = a.trial_idx
         JOIN measurements m ON m.campaign = a.campaign AND m.trial_idx = a.trial_idx AND m.attempt = a.attempt
         WHERE t.device = 'sim-iphone-1' AND m.metric = 'charge_used_mah' AND a.status = 'valid' LIMIT 1",
    );
    let (dir, charge) = rows[0].split_once('|').unwrap();
    let powerlog = lab.artifacts().join(dir).join("powerlog.PLSQL");
    let out = lab.cmd(&["import", "ios-powerlog", powerlog.to_str().unwrap(), "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let imported = v["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == "charge_used_mah").unwrap();
    assert_eq!(imported["value"].as_f64().unwrap(), charge.parse::<f64>().unwrap(), "the phone's record, read back");
    assert_eq!(v["parsed"]["soak"]["charging_s"], 0.0);
    assert_eq!(v["parsed"]["time_offsets"], 1, "its clock is corrected through the offset row");
}

#[test]
fn an_audit_run_by_hand_is_attached_as_a_trial_with_its_battery_curve() {
    let lab = TempLab::new();
    let path = db(lab.dir.path(), "CurrentPowerlog.PLSQL", &rows(false), true);
    let out = lab
        .cmd(&["import", "ios-powerlog", path.to_str().unwrap(), "--variant", "envoy", "--device", "iphone-12"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let metrics: Vec<String> = lab.sql("SELECT metric || '=' || value FROM measurements ORDER BY seq");
    assert!(metrics.contains(&"charge_used_mah=250.0".to_string()), "{metrics:?}");
    let series: Vec<String> = lab.sql("SELECT name || ' ' || source || ' ' || length(points) FROM series");
    // From the unplug (+900) to the plug-in (+4700): the level in force, then 5 rows (16 bytes a point).
    assert_eq!(series, ["battery_pct iOS powerlog battery level 96"]);
}
