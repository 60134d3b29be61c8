//! Property tests: every parser, fed random text, random checkin-like rows, and real
//! captures that were truncated or mutated, returns a value or an error naming a line in
//! the input (or a byte, for binary plists), and never panics.

use std::path::PathBuf;

use lab::collect::{
    ParseError, android::battery as android_battery, android::batterystats_checkin, android::bluetooth,
    android::cpuinfo, android::dumpsys_wifi, android::history_text, android::meminfo, android::perfetto,
    android::settings, android::thermal, android::wifi_status, ios::battery as ios_battery, linux::proc_stat,
};
use proptest::prelude::*;

type TextParser = fn(&str) -> Option<ParseError>;

fn err<T>(r: Result<T, ParseError>) -> Option<ParseError> {
    r.err()
}

/// Every line-oriented parser, by name.
const TEXT_PARSERS: &[(&str, TextParser)] = &[
    ("android_battery", |t| err(android_battery::parse(t))),
    ("batterystats_checkin", |t| err(batterystats_checkin::parse(t))),
    ("history_text", |t| err(history_text::parse(t))),
    ("thermal", |t| err(thermal::parse(t))),
    ("settings", |t| err(settings::parse(t))),
    ("wifi_status", |t| err(wifi_status::parse(t))),
    ("dumpsys_wifi", |t| err(dumpsys_wifi::parse(t))),
    ("bluetooth", |t| err(bluetooth::parse(t))),
    ("meminfo", |t| err(meminfo::parse(t))),
    ("cpuinfo", |t| err(cpuinfo::parse(t))),
    ("proc_stat", |t| err(proc_stat::parse(t))),
];

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/devices").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Inputs worth mutating: the real captures, and samples of the formats without one.
fn seeds() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        "android/battery_adbts_emulator.txt",
        "android/batterystats_checkin_v36_perfetto.txt",
        "android/batterystats_history_text_loganalysis_nodischarge.txt",
        "android/cpuinfo_loganalysis_single.txt",
        "android/dumpsys_wifi_loganalysis_noevents.txt",
        "android/wifi_status_tradefed.txt",
    ]
    .iter()
    .map(|f| fixture(f))
    .collect();
    for s in [
        "Thermal Status: 1\nCached temperatures:\n\tTemperature{mValue=38.1, mType=0, mName=AP, mStatus=0}\nCurrent temperatures from HAL:\n\tTemperature{mValue=33.5, mType=2, mName=BAT, mStatus=0}\n",
        "** MEMINFO in pid 1234 [com.example] **\n                   Pss  Private  Private  SwapPss      Rss\n                 Total    Dirty    Clean    Dirty    Total\n                ------   ------   ------   ------   ------\n        TOTAL    30123    25000     2000        0    61000\n App Summary\n           TOTAL PSS:    30123       TOTAL RSS:    61000\n",
        "Bluetooth Status\n  enabled: true\n  state: ON\n  name: Pixel\n",
        "4242 (my app) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 30 0 0 20 0 12 0 98765 123456789 2500\n",
        "1 (x) R 1 1 1 0 -1 0 0 0 0 0 18446744073709551615 18446744073709551615 0 0 20 0 1 0 1 1 1\n",
        "** MEMINFO in pid 1 [a] **\n Pss Rss\n Total Total\n ------ ------\n TOTAL 18446744073709551615 18446744073709551615\n** MEMINFO in pid 2 [a:b] **\n Pss Rss\n Total Total\n ------ ------\n TOTAL 18446744073709551615 18446744073709551615\n",
        "9,0,l,nt,9223372036854775807,9223372036854775807,9223372036854775807,9223372036854775807,9223372036854775807,9223372036854775807,9223372036854775807,9223372036854775807\n9,0,l,nt,9223372036854775807,1,1,1,9223372036854775807,1,1,1\n9,0,l,cpu,9223372036854775807,9223372036854775807\n9,0,l,wl,a,9223372036854775807,p,9223372036854775807,b,9223372036854775807,p,9223372036854775807\n9,0,l,pwi,uid,1e308,0\n9,0,l,pwi,uid,1e308,0\n9,h,0:TIME:-9223372036854775808,+w=1\n9,h,9223372036854775807:TIME:9223372036854775807,-w=1\n",
        "Battery History (1% used):\n     0 (9) RESET:TIME: 2024-01-01-10-00-00\n  +1s000ms (2) 100 c0900020\n  +10m01s000ms (1) 099 c0900020\n",
        "9,0,i,vers,36,214,A,B\n9,0,i,uid,10250,com.x\n9,0,l,dc,4,5,2,3,180,120\n9,10250,l,pwi,uid,12.5,0,3.1,1.0\n9,10250,l,wl,w,0,f,0,0,0,0,2000,p,4,0,800,2100,0,w,0,0,0,0\n9,10250,l,nt,1,2,3,4,5,6,7,8\n9,0,l,m,1,2,3,4,5\n",
        "128\n",
    ] {
        v.push(s.as_bytes().to_vec());
    }
    v
}

/// A parse error must point inside the input: a line from 1 to one past the last.
fn assert_line_in_range(name: &str, text: &str, e: &ParseError) {
    let last = text.lines().count() + 1;
    match e.line() {
        Some(l) => assert!((1..=last).contains(&l), "{name}: line {l} outside 1..={last}: {e}"),
        None => panic!("{name}: a text parser returned an error without a line: {e}"),
    }
    assert!(!e.message().is_empty(), "{name}: empty error message");
}

fn run_all(text: &str) {
    for (name, parse) in TEXT_PARSERS {
        if let Some(e) = parse(text) {
            assert_line_in_range(name, text, &e);
        }
    }
}

#[derive(Debug, Clone)]
enum Edit {
    Truncate(usize),
    Delete(usize, usize),
    Insert(usize, Vec<u8>),
    Replace(usize, u8),
    DuplicateLine(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let special = prop::sample::select(b",:=()%{}\"-+.\n\t 0123456789abcxyzN/A".to_vec());
    prop_oneof![
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), 1..40usize).prop_map(|(a, n)| Edit::Delete(a, n)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..12)).prop_map(|(a, b)| Edit::Insert(a, b)),
        (any::<usize>(), special).prop_map(|(a, b)| Edit::Replace(a, b)),
        any::<usize>().prop_map(Edit::DuplicateLine),
    ]
}

fn apply(mut b: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let len = b.len().max(1);
        match e {
            Edit::Truncate(a) => b.truncate(a % len),
            Edit::Delete(a, n) => {
                let start = a % len;
                let end = (start + n).min(b.len());
                if start < end {
                    b.drain(start..end);
                }
            }
            Edit::Insert(a, bytes) => {
                let at = (a % len).min(b.len());
                b.splice(at..at, bytes.iter().copied());
            }
            Edit::Replace(a, c) => {
                if !b.is_empty() {
                    let i = a % b.len();
                    b[i] = *c;
                }
            }
            Edit::DuplicateLine(a) => {
                let text = String::from_utf8_lossy(&b).into_owned();
                let lines: Vec<&str> = text.split('\n').collect();
                let i = a % lines.len();
                let mut out: Vec<&str> = lines.clone();
                out.insert(i, lines[i]);
                b = out.join("\n").into_bytes();
            }
        }
    }
    b
}

/// Rows shaped like checkin rows, with row types the parser knows and values of any kind.
fn checkin_rows() -> impl Strategy<Value = String> {
    let kind = prop::sample::select(vec![
        "vers", "uid", "bt", "dc", "pws", "pwi", "m", "gn", "nt", "cpu", "pr", "wl", "kwl", "zz",
    ]);
    let cat = prop::sample::select(vec!["i", "l", "c", "h", "hsp"]);
    let field = prop_oneof![
        (-5i64..100_000).prop_map(|x| x.to_string()),
        prop::sample::select(vec![
            "9223372036854775807",
            "-9223372036854775808",
            "18446744073709551615",
            "1e308",
            "NaN"
        ])
        .prop_map(str::to_string),
        (-1e6f64..1e6).prop_map(|x| format!("{x:.2}")),
        prop::sample::select(vec![
            "f",
            "p",
            "bp",
            "w",
            "N/A",
            "",
            "\"q,uo\"",
            "uid",
            "+w=1",
            "-w=1",
            "Bl=50",
            "0:RESET:TIME:1000",
            "+S",
            "x"
        ])
        .prop_map(str::to_string),
    ];
    let row = (cat, kind, prop::collection::vec(field, 0..14), -1i64..20_000).prop_map(|(c, k, f, uid)| {
        let head = match c {
            "h" | "hsp" => format!("9,{c}"),
            _ => format!("9,{uid},{c},{k}"),
        };
        std::iter::once(head).chain(f).collect::<Vec<_>>().join(",")
    });
    prop::collection::vec(row, 0..30).prop_map(|rows| rows.join("\n"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(s in "\\PC{0,300}") {
        run_all(&s);
    }

    #[test]
    fn random_lines_never_panic(lines in prop::collection::vec("[ -~\t]{0,80}", 0..20)) {
        run_all(&lines.join("\n"));
    }

    #[test]
    fn checkin_like_rows_never_panic(text in checkin_rows()) {
        if let Err(e) = batterystats_checkin::parse(&text) {
            assert_line_in_range("batterystats_checkin", &text, &e);
        }
    }

    #[test]
    fn mutated_captures_never_panic(seed in 0usize..13, edits in prop::collection::vec(edit(), 1..6)) {
        let seeds = seeds();
        let bytes = apply(seeds[seed % seeds.len()].clone(), &edits);
        run_all(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn mutated_plists_never_panic(which in 0usize..4, edits in prop::collection::vec(edit(), 1..6)) {
        let xml = fixture(if which % 2 == 0 { "ios/applesmartbattery_iphonestatus.plist" } else { "ios/ioregistry_iopmpowersource_goios.plist" });
        let input = if which < 2 {
            xml
        } else {
            let v = plist::Value::from_reader_xml(std::io::Cursor::new(&xml)).unwrap();
            let mut buf = Vec::new();
            plist::to_writer_binary(&mut buf, &v).unwrap();
            buf
        };
        let bytes = apply(input, &edits);
        if let Err(e) = ios_battery::parse(&bytes)
            && let Some(l) = e.line() {
                let last = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
                prop_assert!((1..=last).contains(&l), "line {l} outside 1..={last}: {e}");
            }
    }

    #[test]
    fn mutated_perfetto_traces_never_panic(which in 0usize..2, edits in prop::collection::vec(edit(), 1..6)) {
        let name = if which == 0 { "android/power_rails_session_uuid_perfetto.pftrace" } else { "android/power_rails_timestamp_sort_perfetto.pftrace" };
        let bytes = apply(fixture(name), &edits);
        match perfetto::PowerTrace::parse(&bytes) {
            Ok(t) => { let _ = (t.energy_per_rail_uws(), t.battery_pct_series()); }
            Err(e) => prop_assert!(matches!(e, ParseError::Byte { offset, .. } if offset <= bytes.len() as u64), "{e}"),
        }
    }

    #[test]
    fn random_bytes_as_perfetto_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = perfetto::PowerTrace::parse(&bytes) {
            prop_assert!(matches!(e, ParseError::Byte { offset, .. } if offset <= bytes.len() as u64), "{e}");
        }
    }

    #[test]
    fn random_bytes_as_plist_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = ios_battery::parse(&bytes);
        let mut b = b"bplist00".to_vec();
        b.extend(&bytes);
        let _ = ios_battery::parse(&b);
    }
}

/// Every fixture cut after each of its lines: either it still parses, or the error names a
/// line of the cut input.
#[test]
fn truncated_captures_fail_with_a_line() {
    for seed in seeds() {
        let text = String::from_utf8_lossy(&seed).into_owned();
        // The whole input, then every prefix.
        run_all(&text);
        let _ = batterystats_checkin::parse(&text).map(|c| (c.apps(), c.app("a")));
        let mut cut = 0;
        for line in text.split_inclusive('\n') {
            cut += line.len();
            run_all(&text[..cut]);
            // Cut inside the line too.
            let mid = cut - line.len() / 2;
            if text.is_char_boundary(mid) {
                run_all(&text[..mid]);
            }
        }
    }
}

/// Garbage gives a clear error with a line for every parser that expects structure.
#[test]
fn garbage_is_an_error_with_a_line() {
    let garbage = "\u{0}\u{1}PK\u{3}\u{4} this is a zip file, not a dump\n#!/bin/sh\necho hello\n";
    for (name, parse) in TEXT_PARSERS {
        if *name == "settings" {
            continue; // `settings get` can print any text as a value; two lines are an error (below)
        }
        let e = parse(garbage).unwrap_or_else(|| panic!("{name}: garbage was accepted"));
        assert_line_in_range(name, garbage, &e);
    }
    assert!(settings::parse(garbage).is_err());
    let e = ios_battery::parse(garbage.as_bytes()).unwrap_err();
    assert!(e.line().is_some(), "{e}");
}
