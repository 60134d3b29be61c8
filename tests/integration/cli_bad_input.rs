//! Every file of the bad-input corpus (tests/fixtures/bad/) gives a clear error with
//! its location, exit code 2, and no campaign in the store.

use crate::common;

use common::{TempLab, root};

#[test]
fn every_bad_input_is_refused_with_a_located_error_and_changes_nothing() {
    let dir = root().join("tests/fixtures/bad");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 15, "the corpus holds at least 15 bad inputs, found {}", files.len());

    let mut transcript = String::new();
    for name in &files {
        let rel = format!("tests/fixtures/bad/{name}");
        let lab = TempLab::new();
        let assert = if name.starts_with("lab-") {
            let mut c = assert_cmd::Command::cargo_bin("lab").unwrap();
            c.current_dir(root()).args(["--lab", &rel, "run", "runbooks/quickstart.toml"]).env_remove("LAB_CONFIG");
            c.assert()
        } else {
            lab.cmd(&["run", &rel]).assert()
        };
        let out = assert.code(2).get_output().clone();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(out.stdout.is_empty(), "{name}: nothing on stdout");
        assert!(!stderr.trim().is_empty(), "{name}: an error is printed");
        for line in stderr.lines() {
            assert!(line.starts_with("error: "), "{name}: every line is an error line: {line}");
            assert!(line.contains(name.as_str()), "{name}: the error names the file: {line}");
            assert!(line.contains("fix:"), "{name}: the error says how to fix it: {line}");
        }
        assert!(!lab.store().exists(), "{name}: no store was created");
        let stderr = stderr.replace(&lab.dir.path().display().to_string(), "<tmp>");
        transcript.push_str(&format!("$ lab run {rel}\n{stderr}\n"));
    }
    // No bad lab file left a store next to itself either.
    let leftovers: Vec<_> = walk(&dir).into_iter().filter(|p| p.extension().is_some_and(|e| e == "db")).collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    insta::assert_snapshot!("bad_inputs", transcript);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
