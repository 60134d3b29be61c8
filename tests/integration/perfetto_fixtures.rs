//! The Perfetto power-rail traces in tests/fixtures/devices/android/ decode to every row that
//! perfetto's own diff tests expect from trace processor (their `.expected.toml`), and every
//! prefix of them is a value or an error naming a byte of the prefix, never a panic.

use std::path::PathBuf;

use lab::collect::ParseError;
use lab::collect::android::perfetto::PowerTrace;
use sha2::{Digest, Sha256};
use toml::Value;

fn data(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/devices/android").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn expected(stem: &str) -> toml::Table {
    let t = String::from_utf8(data(&format!("{stem}.expected.toml"))).unwrap();
    t.parse().unwrap_or_else(|e| panic!("{stem}: {e}"))
}

fn trace(stem: &str, sha256: &str) -> PowerTrace {
    let bytes = data(&format!("{stem}.pftrace"));
    // The hash SOURCES.md gives, so the expectations are checked against the file they describe.
    assert_eq!(hex::encode(Sha256::digest(&bytes)), sha256, "{stem}.pftrace changed");
    PowerTrace::parse(&bytes).unwrap_or_else(|e| panic!("{stem}: {e}"))
}

/// Trace processor's counter rows for the rails: (track name, ts ns, value, packet ts ns).
fn rows(t: &PowerTrace) -> Vec<(String, i64, f64, Option<i64>)> {
    t.rails
        .iter()
        .flat_map(|r| {
            r.samples.iter().map(|s| {
                (format!("power.{}_uws", r.name), s.ts_ns as i64, s.energy_uws as f64, s.packet_ts_ns.map(|p| p as i64))
            })
        })
        .collect()
}

/// The expectation file has exactly the keys the test reads, so no value goes unchecked.
fn assert_keys(want: &toml::Table, read: &[&str]) {
    let mut keys: Vec<&str> = want.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, read, "a key no check reads");
}

fn f(v: &Value) -> f64 {
    v.as_float().or_else(|| v.as_integer().map(|i| i as f64)).unwrap()
}

/// last − first of each track's rows in ts order, from the expected rows themselves.
fn expected_energy(rows: &[(String, i64, f64)]) -> Vec<(String, u64)> {
    let mut names: Vec<&String> = rows.iter().map(|r| &r.0).collect();
    names.sort();
    names.dedup();
    let mut out: Vec<(String, u64)> = names
        .into_iter()
        .map(|n| {
            let vals: Vec<f64> = rows.iter().filter(|r| &r.0 == n).map(|r| r.2).collect();
            let rail = n.strip_prefix("power.").and_then(|s| s.strip_suffix("_uws")).unwrap();
            (rail.to_string(), (vals[vals.len() - 1] - vals[0]) as u64)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn session_uuid_rails_are_matched_by_session_and_index() {
    let stem = "power_rails_session_uuid_perfetto";
    let want = expected(stem);
    let t = trace(stem, "9823db6ae8bbb1d875543e6290d03ea04b6b57f9b68184c2c770f319f6608bef");
    assert_keys(&want, &["row_count", "rows", "series"]);

    // ORDER BY name, ts
    let mut got: Vec<(String, i64, f64)> = rows(&t).into_iter().map(|(n, ts, v, _)| (n, ts, v)).collect();
    got.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let want_rows: Vec<(String, i64, f64)> = want["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let r = r.as_array().unwrap();
            (r[0].as_str().unwrap().to_string(), r[1].as_integer().unwrap(), f(&r[2]))
        })
        .collect();
    assert_eq!(got.len() as i64, want["row_count"].as_integer().unwrap());
    assert_eq!(got, want_rows);

    let series = want["series"].as_table().unwrap();
    assert_eq!(series.len(), t.rails.len());
    for (track, points) in series {
        let rail =
            t.rails.iter().find(|r| &format!("power.{}_uws", r.name) == track).unwrap_or_else(|| panic!("{track}"));
        let want_points: Vec<(i64, f64)> =
            points.as_array().unwrap().iter().map(|p| (p[0].as_integer().unwrap(), f(&p[1]))).collect();
        let got_points: Vec<(i64, f64)> = rail.samples.iter().map(|s| (s.ts_ns as i64, s.energy_uws as f64)).collect();
        assert_eq!(got_points, want_points, "{track}");
    }
    let mut energy = t.energy_per_rail_uws();
    energy.sort();
    assert_eq!(energy, expected_energy(&want_rows));
}

/// The ftrace print counter in that trace: not a power rail, so the decoder skips it.
const NOT_DECODED: &str = "Testing";

#[test]
fn sample_timestamps_win_over_packet_timestamps() {
    let stem = "power_rails_timestamp_sort_perfetto";
    let want = expected(stem);
    let t = trace(stem, "84fcdec3f07a113a0e360644e61a703d0b40e778e05e1744d4b0c075f9ff83d3");
    assert_keys(&want, &["row_count", "rows"]);

    let all = want["rows"].as_array().unwrap();
    assert_eq!(all.len() as i64, want["row_count"].as_integer().unwrap());
    let mut want_rows = Vec::new();
    for r in all {
        let r = r.as_table().unwrap();
        for k in r.keys() {
            assert!(["ts", "packet_ts", "value", "name"].contains(&k.as_str()), "unread key {k}");
        }
        let name = r["name"].as_str().unwrap().to_string();
        let packet_ts = r.get("packet_ts").map(|v| v.as_integer().unwrap());
        if name == NOT_DECODED {
            assert_eq!(packet_ts, None);
            continue;
        }
        want_rows.push((name, r["ts"].as_integer().unwrap(), f(&r["value"]), packet_ts));
    }
    assert_eq!(want_rows.len(), all.len() - 1);

    // ORDER BY ts; rows of one rail at the same ts stay in trace order (the stable sort).
    let mut got = rows(&t);
    got.sort_by_key(|r| r.1);
    assert_eq!(got, want_rows);

    let plain: Vec<(String, i64, f64)> = want_rows.iter().map(|r| (r.0.clone(), r.1, r.2)).collect();
    let mut energy = t.energy_per_rail_uws();
    energy.sort();
    assert_eq!(energy, expected_energy(&plain));
    assert!(t.battery.is_empty());
}

fn assert_byte_in(e: &ParseError, len: usize, what: &str) {
    match e {
        ParseError::Byte { offset, .. } => assert!(*offset <= len as u64, "{what}: byte {offset} past {len}: {e}"),
        ParseError::Line { .. } => panic!("{what}: a binary format names a byte: {e}"),
    }
}

#[test]
fn every_prefix_is_a_trace_or_an_error_at_a_byte() {
    for stem in ["power_rails_session_uuid_perfetto", "power_rails_timestamp_sort_perfetto"] {
        let bytes = data(&format!("{stem}.pftrace"));
        let whole = PowerTrace::parse(&bytes).unwrap();
        let (mut ok, mut err) = (0, 0);
        for n in 0..bytes.len() {
            match PowerTrace::parse(&bytes[..n]) {
                // A cut between packets is a shorter trace.
                Ok(t) => {
                    ok += 1;
                    assert!(t.packets < whole.packets, "{stem}[..{n}]");
                }
                Err(e) => {
                    err += 1;
                    assert_byte_in(&e, n, &format!("{stem}[..{n}]"));
                }
            }
        }
        // One Ok per packet boundary (including the empty prefix), every other cut an error.
        assert_eq!(ok, whole.packets, "{stem}");
        assert_eq!(err, bytes.len() - whole.packets, "{stem}");
    }
}

#[test]
fn lab_import_perfetto_gives_energy_per_rail_in_mj() {
    use lab::import::{self, ImportKind, ImportOptions};
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/devices/android");
    let stem = "power_rails_session_uuid_perfetto";
    let imp =
        import::run(ImportKind::Perfetto, &[dir.join(format!("{stem}.pftrace"))], &ImportOptions::default()).unwrap();
    let t = PowerTrace::parse(&data(&format!("{stem}.pftrace"))).unwrap();
    let got: Vec<(String, f64, String, String)> =
        imp.metrics.iter().map(|m| (m.metric.clone(), m.value, m.unit.clone(), m.source.clone())).collect();
    // No battery counters in the trace: only the rails, µWs / 1000 = mJ.
    let want: Vec<(String, f64, String, String)> = t
        .energy_per_rail_uws()
        .into_iter()
        .map(|(r, uws)| {
            (format!("rail_energy_mj.{r}"), uws as f64 / 1000.0, "mJ".into(), "perfetto power rails".into())
        })
        .collect();
    assert_eq!(got.len(), 2);
    assert_eq!(got, want);

    // The text format is not a trace: a clean error naming the file and a byte.
    let e = import::run(ImportKind::Perfetto, &[dir.join(format!("{stem}.textproto"))], &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("{stem}.textproto: byte ")), "{e}");
    assert!(e.contains("fix: pass a binary Perfetto trace"), "{e}");
}
