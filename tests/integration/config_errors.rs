//! Every file in tests/fixtures/bad/ must be rejected with the errors its README row
//! promises; the full error text of each is snapshotted.
//!
//! Runbooks are checked against the repository's lab.toml; files named `lab-*.toml`
//! are lab files. Paths are relative (cargo runs tests from the crate root), so the
//! snapshots do not depend on where the repository lives.

use std::path::{Path, PathBuf};

use lab::config::{ConfigError, load_lab, load_runbook};

const BAD: &str = "tests/fixtures/bad";

fn bad_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(BAD)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// Loads a bad file the way the CLI would; it must fail.
fn load_bad(path: &Path) -> ConfigError {
    let result = if file_name(path).starts_with("lab-") {
        load_lab(path).map(|_| ())
    } else {
        let lab = load_lab(Path::new("lab.toml")).expect("the repository's lab.toml is valid");
        load_runbook(path, &lab).map(|_| ())
    };
    result.expect_err(&format!("{} was accepted", path.display()))
}

/// (file, text its errors must contain) from the README's table rows:
/// `| \`file.toml\` | what is wrong | `` expected text `` |`.
fn readme_expectations() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(Path::new(BAD).join("README.md")).unwrap();
    readme
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.trim().strip_prefix('|')?.strip_suffix('|')?.split(" | ").collect();
            let file = cells.first()?.trim().strip_prefix('`')?.strip_suffix('`')?;
            // The expected text is a double-backtick code span, so it may contain backticks.
            let expected = cells.last()?.trim().strip_prefix("`` ")?.strip_suffix(" ``")?;
            file.ends_with(".toml").then(|| (file.to_string(), expected.to_string()))
        })
        .collect()
}

#[test]
fn the_corpus_is_large_enough() {
    assert!(bad_files().len() >= 18, "only {} bad files", bad_files().len());
}

#[test]
fn every_bad_file_is_rejected_as_its_readme_says() {
    let expectations = readme_expectations();
    let mut failures = Vec::new();
    for path in bad_files() {
        let name = file_name(&path);
        let err = load_bad(&path);
        let text = err.to_string();
        let wanted: Vec<&String> = expectations.iter().filter(|(f, _)| *f == name).map(|(_, e)| e).collect();
        if wanted.is_empty() {
            failures.push(format!("{name}: no row in README.md"));
        }
        for w in wanted {
            if !text.contains(w.as_str()) {
                failures.push(format!("{name}: expected `{w}` in:\n{text}"));
            }
        }
    }
    for (f, _) in &expectations {
        if !Path::new(BAD).join(f).exists() {
            failures.push(format!("README.md lists {f}, which does not exist"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_diagnostic_names_its_file_and_has_a_place_and_a_fix() {
    for path in bad_files() {
        let err = load_bad(&path);
        assert!(!err.diagnostics.is_empty());
        for d in &err.diagnostics {
            assert_eq!(d.file, path, "{d}");
            assert!(!d.message.is_empty() && !d.fix.is_empty(), "{d}");
            // Only a key missing from the top of the file has no place to point at.
            let top_level_missing = d.message.starts_with("missing") || d.message == "no builds";
            if !top_level_missing {
                assert!(d.line.is_some() && d.column.is_some(), "no line:col: {d}");
                let line_text =
                    std::fs::read_to_string(&path).unwrap().lines().nth(d.line.unwrap() - 1).map(str::to_string);
                assert!(line_text.is_some(), "line out of range: {d}");
            }
            // One line per problem: the CLI prints them one per line.
            assert!(!d.to_string().contains('\n'), "{d}");
        }
        // File order, so a reader can walk down the file.
        let places: Vec<(usize, usize)> =
            err.diagnostics.iter().map(|d| (d.line.unwrap_or(0), d.column.unwrap_or(0))).collect();
        assert!(places.is_sorted(), "{}: not in file order", path.display());
    }
}

#[test]
fn error_text_snapshots() {
    for path in bad_files() {
        let name = file_name(&path);
        let text = load_bad(&path).to_string();
        insta::assert_snapshot!(name.trim_end_matches(".toml").to_string(), text);
    }
}

#[test]
fn a_missing_file_names_the_file_and_the_fix() {
    let err = load_lab(Path::new("tests/fixtures/bad/no-such-lab.toml")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tests/fixtures/bad/no-such-lab.toml: lab file not found; fix: check the path, or create the file \
         (a lab file lists hosts and devices; the repository's lab.toml is a start; see docs/config.md)"
    );
    let lab = load_lab(Path::new("lab.toml")).unwrap();
    let err = load_runbook(Path::new("runbooks/nope.toml"), &lab).unwrap_err();
    assert!(err.to_string().starts_with("runbooks/nope.toml: runbook not found; fix: check the path"), "{err}");
    let err = load_runbook(Path::new("runbooks"), &lab).unwrap_err();
    assert!(err.to_string().starts_with("runbooks: runbook is a folder; fix:"), "{err}");
}
