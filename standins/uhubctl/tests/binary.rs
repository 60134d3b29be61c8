//! The binary as lab's integration tests run it. Being an integration test, this makes
//! `cargo test --workspace` build `target/<profile>/uhubctl` before any test runs.

#[test]
fn dash_h_prints_uhubctls_usage_and_exits_1() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_uhubctl")).arg("-h").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Usage: uhubctl [options]"), "{text}");
}
