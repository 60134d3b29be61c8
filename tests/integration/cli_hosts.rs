//! `lab hosts check` against a real sshd: a good host, a stopped one, an unknown key.

use crate::common;

use common::TempLab;
use common::sshd::{self, Sshd};

fn lab_with(s: &Sshd, known_hosts: &std::path::Path) -> TempLab {
    TempLab::from_text(&format!(
        "[lab]\nname = \"remote\"\n\n[[host]]\nname = \"shelf-1\"\naddress = \"{}\"\nuser = \"{}\"\nidentity = \"{}\"\nknown_hosts = \"{}\"\nconnect_timeout = \"3s\"\n",
        s.address(),
        s.user,
        s.client_key().display(),
        known_hosts.display()
    ))
}

#[test_needs::needs(sshd)]
#[test]
fn hosts_check_reports_reachable_stopped_and_untrusted_hosts() {
    let mut s = sshd::start();
    let lab = lab_with(&s, &s.known_hosts());
    let out = lab.cmd(&["hosts", "check", "--json"]).assert().success().get_output().stdout.clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let hosts = v.as_array().unwrap();
    assert_eq!(hosts.len(), 2, "local and shelf-1: {v}");
    let shelf = hosts.iter().find(|h| h["host"] == "shelf-1").unwrap();
    assert_eq!(
        (shelf["reachable"].as_bool(), shelf["host_key"].as_bool(), shelf["login"].as_bool()),
        (Some(true), Some(true), Some(true))
    );
    assert!(shelf["latency_ms"].as_f64().unwrap() > 0.0);

    let untrusted = lab_with(&s, &s.wrong_known_hosts());
    let out = untrusted.cmd(&["hosts", "check"]).assert().code(3).get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("HOST KEY CHANGED"), "{text}");

    s.stop();
    let start = std::time::Instant::now();
    let out = lab.cmd(&["hosts", "check"]).assert().code(3).get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("shelf-1: shelf-1 is unreachable"), "{text}");
    // No hang: one attempt, bounded by the 3 s connect timeout.
    assert!(start.elapsed() < std::time::Duration::from_secs(15), "{:?}", start.elapsed());
}
