//! docs/architecture.md's "Crates and why" against Cargo.toml: every dependency has its
//! row, every row names a dependency, and a row that lists features (after a `;` in its
//! parentheses, as idevice's does) lists exactly the ones Cargo.toml turns on.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Each crate a row names, with the features it lists (`None` when it lists none).
fn table_crates(markdown: &str) -> Result<BTreeMap<String, Option<Vec<String>>>, String> {
    let section = markdown.split("\n## Crates and why\n").nth(1).ok_or("no `## Crates and why` section")?;
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| ")) {
        let cell = line.trim_start_matches("| ").split(" | ").next().unwrap_or_default().trim();
        // The header, and a row that names what the project does without a crate.
        if cell == "crate" || cell.starts_with('(') {
            continue;
        }
        let mut names = String::new();
        let mut features: Option<Vec<String>> = None;
        let mut rest = cell;
        while let Some(open) = rest.find('(') {
            names.push_str(&rest[..open]);
            let close = rest[open..].find(')').ok_or_else(|| format!("unclosed parenthesis in `{cell}`"))? + open;
            if let Some((_, listed)) = rest[open + 1..close].split_once(';') {
                features = Some(listed.split(',').map(|f| f.trim().to_string()).collect());
            }
            rest = &rest[close + 1..];
        }
        names.push_str(rest);
        for name in names.split([',']).flat_map(|n| n.split(" and ")).map(str::trim).filter(|n| !n.is_empty()) {
            out.insert(name.to_string(), features.clone());
        }
    }
    Ok(out)
}

/// Cargo.toml's `[dependencies]`, each with the features it turns on.
fn manifest_crates(manifest: &str) -> BTreeMap<String, Vec<String>> {
    let doc: toml_edit::DocumentMut = manifest.parse().expect("Cargo.toml parses");
    let deps = doc["dependencies"].as_table_like().expect("a [dependencies] table");
    deps.iter()
        .map(|(name, item)| {
            let features = item
                .as_table_like()
                .and_then(|t| t.get("features"))
                .and_then(|f| f.as_array())
                .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            (name.to_string(), features)
        })
        .collect()
}

/// What the table says that Cargo.toml does not, one line each.
fn disagreements(markdown: &str, manifest: &str) -> Vec<String> {
    let table = match table_crates(markdown) {
        Ok(t) => t,
        Err(e) => return vec![e],
    };
    let deps = manifest_crates(manifest);
    let mut out = Vec::new();
    for name in deps.keys().filter(|n| !table.contains_key(*n)) {
        out.push(format!("{name}: in Cargo.toml, no row says why"));
    }
    for (name, listed) in &table {
        match (deps.get(name), listed) {
            (None, _) => out.push(format!("{name}: a row, but not a dependency in Cargo.toml")),
            (Some(on), Some(listed)) => {
                let (mut on, mut listed) = (on.clone(), listed.clone());
                on.sort();
                listed.sort();
                if on != listed {
                    out.push(format!("{name}: the row lists features {listed:?}, Cargo.toml turns on {on:?}"));
                }
            }
            (Some(_), None) => {}
        }
    }
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_crates_table_of_docs_architecture_md_is_cargo_toml_s() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let found = disagreements(&doc, &manifest);
    assert!(
        found.is_empty(),
        "docs/architecture.md's `Crates and why` and Cargo.toml disagree; fix the table (or drop the crate):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_missing_row_an_extra_row_and_a_changed_feature_are_found() {
    let doc = "# Architecture\n\n## Crates and why\n\n| crate | why |\n|---|---|\n| a, b (1.0) | x |\n| c (=1; f1, f2) | y |\n\
               | gone | z |\n| (none: parsed by hand) | w |\n\n## Next\n| d | not this table |\n";
    let manifest = "[dependencies]\na = \"1\"\nb = { version = \"1\", features = [\"s\"] }\n\
                    c = { version = \"=1\", features = [\"f1\", \"f3\"] }\nd = \"1\"\n";
    assert_eq!(
        disagreements(doc, manifest),
        [
            "d: in Cargo.toml, no row says why",
            "c: the row lists features [\"f1\", \"f2\"], Cargo.toml turns on [\"f1\", \"f3\"]",
            "gone: a row, but not a dependency in Cargo.toml",
        ]
    );
}
