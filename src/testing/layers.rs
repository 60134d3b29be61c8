//! The layer table of `docs/architecture.md` checked against the code: every `crate::…`
//! path in a module's files must name a module its row allows, so the map stays true.
//!
//! Test code counts too (a test that reaches up couples the layers as much as code does),
//! with one exception: only test code may import `testing`, the fakes and fixtures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One row of the table: a layer number (none for test support) and what it may import.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    layer: Option<u32>,
    /// The layers its modules may import, inclusive; `None`: nothing of the lab.
    may_import: Option<(u32, u32)>,
}

/// Module name → its row, from the table under "## Layers" (`| layer | modules | may import |`).
fn parse_table(markdown: &str) -> Result<BTreeMap<String, Row>, String> {
    let mut rows = BTreeMap::new();
    let mut in_section = false;
    for line in markdown.lines() {
        if line.starts_with("## ") {
            in_section = line.trim() == "## Layers";
            continue;
        }
        if !in_section || !line.starts_with('|') || line.starts_with("| layer") || line.starts_with("|--") {
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let [layer, modules, may] = cells[..] else {
            return Err(format!("a layer row needs three cells: {line}"));
        };
        let layer = layer.parse::<u32>().ok();
        let may_import = layer_range(may).ok_or_else(|| format!("`{may}`: write `layers N–M` or `nothing`"))?;
        for module in modules.split(',').map(|m| m.trim().trim_matches('`')) {
            if rows.insert(module.to_string(), Row { layer, may_import }).is_some() {
                return Err(format!("`{module}` is in two rows"));
            }
        }
    }
    Ok(rows)
}

/// `layers 3–11` (or `layer 11`, or `nothing…`) as a range.
fn layer_range(cell: &str) -> Option<Option<(u32, u32)>> {
    if cell.starts_with("nothing") {
        return Some(None);
    }
    let rest = cell.strip_prefix("layers ").or_else(|| cell.strip_prefix("layer "))?;
    let numbers = rest.split(';').next()?.trim();
    let (lo, hi) = numbers.split_once('–').unwrap_or((numbers, numbers));
    Some(Some((lo.trim().parse().ok()?, hi.trim().parse().ok()?)))
}

/// A `crate::X` path in a file.
#[derive(Debug, Clone, PartialEq)]
struct Edge {
    line: usize,
    target: String,
    in_test: bool,
}

/// Every `crate::X` of `text` (comments left out), and whether it sits in test code: the
/// whole file when `test_file`, else from an inline `#[cfg(test)] mod … {` to the end (the
/// crate keeps its test modules last).
fn edges(text: &str, test_file: bool) -> Vec<Edge> {
    let mut out = Vec::new();
    let mut in_test = test_file;
    let mut cfg_test = false;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line == "#[cfg(test)]" {
            cfg_test = true;
        } else if cfg_test && line.contains("mod ") && line.ends_with('{') {
            in_test = true;
        } else if !line.starts_with("#[") {
            cfg_test = false;
        }
        let code = without_strings(line);
        let mut rest = code.split("//").next().unwrap_or("");
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().last();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue; // `lab_crate::`, `$crate::`
            }
            let target: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            if !target.is_empty() {
                out.push(Edge { line: i + 1, target, in_test });
            }
        }
    }
    out
}

/// `line` with the insides of its string literals blanked (a path in a string is no import).
fn without_strings(line: &str) -> String {
    let line = line.replace("'\"'", "' '").replace("'\\\"'", "' '");
    let (mut out, mut in_str, mut escaped) = (String::with_capacity(line.len()), false, false);
    for c in line.chars() {
        match (in_str, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => {
                in_str = !in_str;
                out.push(c);
            }
            (true, false, _) => {}
            (false, _, _) => out.push(c),
        }
    }
    out
}

/// Files declared as test modules (`#[cfg(test)]`, maybe `#[path = "…"]`, then `mod x;`).
fn test_files(file: &Path, text: &str) -> Vec<PathBuf> {
    let dir = file.parent().unwrap_or(Path::new(""));
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let children = if stem == "mod" || stem == "lib" { dir.to_path_buf() } else { dir.join(stem) };
    let mut out = Vec::new();
    let (mut cfg_test, mut path) = (false, None::<String>);
    for line in text.lines().map(str::trim) {
        if line == "#[cfg(test)]" {
            cfg_test = true;
        } else if let Some(p) = line.strip_prefix("#[path = \"").and_then(|l| l.strip_suffix("\"]")) {
            path = Some(p.to_string());
        } else if cfg_test && let Some(name) = line.split("mod ").nth(1).and_then(|n| n.strip_suffix(';')) {
            // `#[path]` is relative to the declaring file's folder for a non-mod.rs file too.
            out.push(match path.take() {
                Some(p) => dir.join(p),
                None if children.join(format!("{name}.rs")).exists() => children.join(format!("{name}.rs")),
                None => children.join(name).join("mod.rs"),
            });
            cfg_test = false;
        } else if !line.starts_with("#[") {
            cfg_test = false;
            path = None;
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every edge of `src/` the table does not allow, as `file:line: a → b (why)`.
fn violations(src: &Path, table: &BTreeMap<String, Row>) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut tests = Vec::new();
    for f in &files {
        tests.extend(test_files(f, &std::fs::read_to_string(f).unwrap()));
    }
    let mut out = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(src).unwrap();
        let module = rel.components().next().unwrap().as_os_str().to_str().unwrap().trim_end_matches(".rs");
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(row) = table.get(module) else {
            out.push(format!("src/{}: module `{module}` is not in the layer table", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for e in edges(&text, tests.contains(f)) {
            if e.target == module {
                continue;
            }
            let at = format!("src/{}:{}: {module} → {}", rel.display(), e.line, e.target);
            if e.target == "testing" {
                if !e.in_test && module != "testing" {
                    out.push(format!("{at} (only test code may import `testing`)"));
                }
                continue;
            }
            let Some(target) = table.get(&e.target) else {
                out.push(format!("{at} (`{}` is not in the layer table)", e.target));
                continue;
            };
            let allowed = match (row.may_import, target.layer) {
                (Some((lo, hi)), Some(l)) => (lo..=hi).contains(&l),
                _ => false,
            };
            if !allowed {
                out.push(format!("{at} (not allowed by the layer table)"));
            }
        }
    }
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_import_follows_the_layer_table_of_docs_architecture_md() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let table = parse_table(&doc).unwrap();
    assert!(table.len() > 10, "no layer table under `## Layers` in docs/architecture.md");
    let found = violations(&root().join("src"), &table);
    assert!(
        found.is_empty(),
        "imports the layer table of docs/architecture.md does not allow; move the code to the layer it \
         belongs to (or, if the map is wrong, fix the map):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_table_names_every_module_and_only_modules() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let table = parse_table(&doc).unwrap();
    let mut modules: Vec<String> = std::fs::read_dir(root().join("src"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().trim_end_matches(".rs").to_string())
        .filter(|m| m != "lib" && m != "main")
        .collect();
    modules.sort();
    let named: Vec<String> = table.keys().cloned().collect();
    assert_eq!(named, modules, "the layer table and src/ disagree");
}

#[test]
fn an_upward_import_is_found_and_test_code_is_told_apart() {
    let table = parse_table(
        "## Layers\n| layer | modules | may import |\n|---|---|---|\n| 1 | `runner` | layers 2–3 |\n\
         | 2 | `store` | layer 3 |\n| 3 | `stats` | nothing of the lab |\n| – | `testing` | layers 2–3 |\n\n## Next\n",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    for (file, text) in [
        ("runner/mod.rs", "use crate::store::Store;\n"),
        ("store/mod.rs", "use crate::stats::mean;\nfn f() { crate::runner::go() } // crate::runner in a comment\n"),
        ("store/sub.rs", "#[cfg(test)]\n#[path = \"sub_tests.rs\"]\nmod tests;\n"),
        ("store/sub_tests.rs", "use crate::testing::fake;\n"),
        ("stats/mod.rs", "use crate::testing::fake;\n#[cfg(test)]\nmod tests {\n    use crate::testing::fake;\n}\n"),
        ("testing/mod.rs", "use crate::store::Store;\n"),
    ] {
        std::fs::create_dir_all(src.join(file).parent().unwrap()).unwrap();
        std::fs::write(src.join(file), text).unwrap();
    }
    assert_eq!(
        violations(src, &table),
        [
            "src/stats/mod.rs:1: stats → testing (only test code may import `testing`)",
            "src/store/mod.rs:2: store → runner (not allowed by the layer table)",
        ]
    );
}

/// `src/cli/<name>_cmd.rs` (and `serve/`) naming another command's module: commands are
/// leaves; what two share lives in a module of its own (`context`, `campaign_run`, …).
/// `lab hosts forward` is `hosts`'s subcommand, in `forward_cmd.rs`.
fn command_imports(cli: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(cli, &mut files);
    let command_of = |f: &Path| -> Option<String> {
        let rel = f.strip_prefix(cli).ok()?;
        match rel.components().next()?.as_os_str().to_str()? {
            "serve" => Some("serve".into()),
            name => name.strip_suffix("_cmd.rs").map(str::to_string),
        }
    };
    let mut out = Vec::new();
    for f in files {
        let Some(me) = command_of(&f) else { continue };
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = without_strings(line);
            let code = code.split("//").next().unwrap_or_default();
            let named = code.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| w.ends_with("_cmd"));
            for other in named.map(|w| w.trim_end_matches("_cmd")) {
                let allowed =
                    other == me || (me == "hosts" && other == "forward") || (me == "serve" && other == "serve");
                if !allowed {
                    out.push(format!(
                        "src/cli/{}:{}: {me} → {other}_cmd",
                        f.strip_prefix(cli).unwrap().display(),
                        n + 1
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn commands_are_leaves() {
    let found = command_imports(&root().join("src/cli"));
    assert!(
        found.is_empty(),
        "a command's module uses another's; move what they share to a module of its own in src/cli/:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_command_using_another_is_found() {
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in [
        ("rerun_cmd.rs", "use super::run_cmd;\nuse super::campaign_run; // not run_cmd\n"),
        ("hosts_cmd.rs", "use super::forward_cmd::ForwardArgs;\n"),
        ("serve/routes.rs", "crate::cli::confirm_cmd::answer_step(\"report_cmd\");\n"),
        ("context.rs", "use super::report_cmd;\n"),
    ] {
        std::fs::create_dir_all(dir.path().join(file).parent().unwrap()).unwrap();
        std::fs::write(dir.path().join(file), text).unwrap();
    }
    let mut found = command_imports(dir.path());
    found.sort();
    assert_eq!(found, ["src/cli/rerun_cmd.rs:1: rerun → run_cmd", "src/cli/serve/routes.rs:1: serve → confirm_cmd"]);
}
