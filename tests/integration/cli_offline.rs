//! A device that is lost and not back within `timeouts.reconnect`: by default its trials
//! wait (the campaign ends interrupted, exit 3, resumable); with `on_offline = "move"` they
//! move to the other devices of its model and the campaign completes. Simulated phones on
//! a virtual clock: the half-hour reconnect wait costs nothing.

use crate::common;

use common::TempLab;

fn lab() -> TempLab {
    TempLab::from_file(&common::root().join("tests/fixtures/lost-lab.toml"))
}

/// (device, outcome-relevant counts) per trial: attempts and valid attempts, by planned device.
fn per_device(lab: &TempLab, sql_device: &str) -> Vec<String> {
    lab.sql(&format!(
        "SELECT t.{sql_device} || ':' || COUNT(a.attempt) || ':' || COALESCE(SUM(a.status = 'valid'), 0) \
         FROM trials t LEFT JOIN attempts a ON a.campaign = t.campaign AND a.trial_idx = t.idx \
         GROUP BY t.idx ORDER BY t.idx"
    ))
}

#[test]
fn trials_of_a_lost_device_wait_and_the_campaign_is_resumable() {
    let lab = lab();
    let out = lab.cmd(&["run", "tests/fixtures/lost.toml"]).assert().code(3).get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    let id = lab.campaigns().remove(0);
    assert!(out.contains(&format!("continue it with: lab run --resume {id}")), "{out}");
    assert!(out.contains("[gone-1] OFFLINE: device lost during"), "{out}");
    assert!(out.contains("[gone-1]") && out.contains("DISCONNECTED"), "the wait is announced: {out}");

    let status: Vec<String> = lab.sql("SELECT status || ' | ' || note FROM campaigns");
    assert!(status[0].starts_with("interrupted | devices offline: gone-1: device lost during"), "{status:?}");
    let states: Vec<String> = lab.sql("SELECT device || '=' || state FROM device_status ORDER BY device");
    assert_eq!(states, ["gone-1=offline", "steady-1=idle", "steady-2=idle"]);
    let st = lab.cmd(&["status"]).assert().success().get_output().stdout.clone();
    let st = String::from_utf8(st).unwrap();
    assert!(st.lines().any(|l| l.contains("gone-1") && l.contains("offline")), "{st}");

    // gone-1's four trials wait: one invalid attempt on the first, none on the rest.
    let before = per_device(&lab, "device");
    let gone: Vec<&String> = before.iter().filter(|r| r.starts_with("gone-1:")).collect();
    assert_eq!(gone, ["gone-1:1:0", "gone-1:0:0", "gone-1:0:0", "gone-1:0:0"]);
    assert!(before.iter().filter(|r| r.starts_with("steady")).all(|r| r.ends_with(":1:1")), "{before:?}");
    let moved: Vec<String> = lab.sql("SELECT key FROM trials WHERE moved_from IS NOT NULL");
    assert!(moved.is_empty(), "nothing moves by default: {moved:?}");

    // Resumed, the phone is still gone: the finished trials are not run again and the
    // waiting one gets its next attempt.
    lab.cmd(&["run", "--resume", &id]).assert().code(3);
    let after = per_device(&lab, "device");
    for (b, a) in before.iter().zip(&after) {
        if b.starts_with("steady") {
            assert_eq!(a, b, "a finished trial was touched by the resume");
        }
    }
    let gone: Vec<&String> = after.iter().filter(|r| r.starts_with("gone-1:")).collect();
    assert_eq!(gone, ["gone-1:2:0", "gone-1:0:0", "gone-1:0:0", "gone-1:0:0"]);
}

#[test]
fn with_on_offline_move_the_trials_run_on_the_other_devices_of_the_model() {
    let lab = lab();
    let out = lab.cmd(&["run", "tests/fixtures/lost-move.toml"]).assert().code(0).get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("[gone-1] offline: 4 pending trials moved to steady-1 (2), steady-2 (2)"), "{out}");

    let status: Vec<String> = lab.sql("SELECT status || ' | ' || note FROM campaigns");
    assert!(status[0].starts_with("done | devices offline: gone-1: "), "{status:?}");
    assert!(status[0].ends_with("4 trials of gone-1 moved to steady-1 (2), steady-2 (2)"), "{status:?}");

    // Every planned trial valid exactly once; the moved ones ran on a steady phone.
    let valid: Vec<i64> = lab.sql(
        "SELECT COUNT(a.attempt) FROM trials t LEFT JOIN attempts a ON a.campaign = t.campaign \
         AND a.trial_idx = t.idx AND a.status = 'valid' GROUP BY t.idx",
    );
    assert_eq!(valid, vec![1; 12]);
    let moved: Vec<String> = lab.sql(
        "SELECT t.moved_from || '>' || t.device || '>' || a.device FROM trials t JOIN attempts a \
         ON a.campaign = t.campaign AND a.trial_idx = t.idx AND a.status = 'valid' \
         WHERE t.moved_from IS NOT NULL ORDER BY t.idx",
    );
    assert_eq!(moved.len(), 4, "{moved:?}");
    for m in &moved {
        let parts: Vec<&str> = m.split('>').collect();
        assert_eq!(parts[0], "gone-1");
        assert!(parts[1].starts_with("steady-") && parts[1] == parts[2], "recorded where it ran: {m}");
    }
    // The lost attempt stays on record, on the phone it was lost on.
    let lost: Vec<String> =
        lab.sql("SELECT device || ' ' || status FROM attempts WHERE device = 'gone-1' ORDER BY trial_idx");
    assert_eq!(lost, ["gone-1 invalid"]);
    // Reports read the moved campaign like any other; results.csv says where each attempt ran.
    lab.cmd(&["report", "--format", "json"]).assert().success();
    let id = lab.campaigns().remove(0);
    let csv = std::fs::read_to_string(lab.artifacts().join(&id).join("results.csv")).unwrap();
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let mut seen = std::collections::BTreeSet::new();
    for r in rdr.records() {
        let r = r.unwrap();
        if r[1].contains("-gone-1-") {
            seen.insert(format!("{} {}", &r[2], &r[11]));
        }
    }
    assert!(seen.contains("gone-1 invalid"), "{seen:?}");
    assert!(seen.iter().filter(|s| s.ends_with(" valid")).all(|s| s.starts_with("steady-")), "{seen:?}");
    assert!(seen.iter().any(|s| s.ends_with(" valid")), "{seen:?}");
}

#[test]
fn adaptive_repeats_go_on_after_the_trials_of_a_lost_device_moved() {
    let lab = lab();
    let text = std::fs::read_to_string(common::root().join("tests/fixtures/lost-move.toml"))
        .unwrap()
        .replace("repeats = 6", "repeats = { min = 3, max = 9, target_ci = \"0.01%\" }");
    let runbook = lab.dir.path().join("lost-adaptive.toml");
    std::fs::write(&runbook, text).unwrap();
    lab.cmd(&["run", runbook.to_str().unwrap()]).assert().code(0);
    // The interval target is out of reach: rounds go on to `max` although a phone was lost.
    let per_variant: Vec<i64> = lab.sql("SELECT COUNT(*) FROM trials GROUP BY variant ORDER BY variant");
    assert_eq!(per_variant, [9, 9]);
    let pending: Vec<i64> = lab.sql(
        "SELECT COUNT(*) FROM trials t WHERE NOT EXISTS (SELECT 1 FROM attempts a WHERE a.campaign = t.campaign \
         AND a.trial_idx = t.idx AND a.status = 'valid')",
    );
    assert_eq!(pending, [0], "every trial ran somewhere");
    let on_gone: Vec<i64> = lab.sql("SELECT COUNT(*) FROM attempts WHERE device = 'gone-1' AND status = 'valid'");
    assert_eq!(on_gone, [0]);
}
