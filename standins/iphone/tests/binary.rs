//! The binary as lab's integration tests run it. Being an integration test, this makes
//! `cargo test --workspace` build `target/<profile>/iphone` before any test runs.

#[test]
fn without_arguments_it_prints_its_usage_and_exits_2() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_iphone")).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("usage: iphone serve --socket PATH --root DIR"), "{err}");
}
