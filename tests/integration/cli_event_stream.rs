//! `lab run --message-format json` on the faulty lab, through the real binary: every line
//! is one JSON object of the versioned stream, and the stream (per device, the times and
//! paths taken out) is snapshotted.

use crate::common;

use std::collections::BTreeMap;

use common::{TempLab, root};

#[test]
fn the_faulty_labs_event_stream_is_one_json_object_per_line_and_says_what_happened() {
    let lab = TempLab::from_file(&root().join("tests/fixtures/faulty-lab.toml"));
    // The fault runbook, shorter: still a lost device, a charging soak and cache hits.
    let text = std::fs::read_to_string(root().join("tests/fixtures/faults.toml"))
        .unwrap()
        .replace("repeats = 12", "repeats = 3");
    let rb = lab.dir.path().join("faults.toml");
    std::fs::write(&rb, text).unwrap();
    let out = lab.cmd(&["run", rb.to_str().unwrap(), "--message-format", "json"]).assert().code(4).get_output().clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.stderr.is_empty(), "nothing but the stream: {}", String::from_utf8_lossy(&out.stderr));

    let lines: Vec<serde_json::Value> =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    for (i, v) in lines.iter().enumerate() {
        assert_eq!(v["v"], 1, "{v}");
        assert_eq!(v["seq"].as_u64(), Some(i as u64), "{v}");
        assert!(v["time"].as_str().is_some_and(|t| t.len() == 24 && t.ends_with('Z')), "{v}");
    }
    let kinds: Vec<&str> = lines.iter().map(|v| v["event"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"campaign_started"));
    assert_eq!(&kinds[kinds.len() - 2..], ["campaign_finished", "report_written"]);
    for kind in ["device_identified", "phase", "attempt_recorded", "disconnected", "reconnected"] {
        assert!(kinds.contains(&kind), "the stream has {kind}");
    }
    let last = lines.last().unwrap();
    assert_eq!(last["exit_code"], 4);
    assert!(last["files"].as_array().unwrap().iter().any(|f| f.as_str().unwrap().ends_with("results.csv")));

    // Devices run in parallel, so their lines interleave differently each run; each
    // device's own lines come in one order. Snapshotted per device, without what changes
    // from run to run (times, sequence numbers, the campaign id and its folder).
    let id = lines[0]["id"].as_str().unwrap().to_string();
    let mut by_device: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for v in &lines {
        let mut v = v.clone();
        let o = v.as_object_mut().unwrap();
        for k in ["v", "seq", "time"] {
            o.remove(k);
        }
        if o.contains_key("wall_s") {
            o.insert("wall_s".into(), "[wall]".into());
        }
        let text =
            v.to_string().replace(&lab.artifacts().display().to_string(), "[artifacts]").replace(&id, "[campaign]");
        let device = v["device"].as_str().unwrap_or("(campaign)").to_string();
        by_device.entry(device).or_default().push(text);
    }
    let snapshot: String =
        by_device.iter().map(|(d, ls)| format!("== {d}\n{}\n", ls.join("\n"))).collect::<Vec<_>>().join("\n");
    insta::assert_snapshot!(snapshot);
}
