//! `[builds.NAME]`: what each build runs on every platform, and which one is the baseline.

use std::collections::BTreeMap;
use std::path::Path;

use crate::config::syntax::files::{absolute, existing_dir, existing_file, existing_file_at, sha256_file};
use crate::config::syntax::names::{NameSet, check_name};
use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::{Field, Table, join};
use crate::config::{AndroidArtifact, ApkFile, Build, HostCommand, IosArtifact, SimProfile};

const BUILD_KEYS: &[&str] = &["baseline", "ios", "android", "host", "sim"];
const IOS_KEYS: &[&str] = &["ipa", "bundle_id"];
const ANDROID_KEYS: &[&str] = &["apk", "apks", "package", "activity"];
const HOST_KEYS: &[&str] = &["command", "build", "env", "cwd"];
const SIM_KEYS: &[&str] =
    &["cpu_pct", "wakeups_per_s", "memory_mb", "cache_hit_ratio", "crash_probability", "build_id"];

/// Reads `[builds]`; reports a missing or doubled baseline. Builds stay in file order.
/// `ios_devices`: whether the runbook selects any iPhone of the lab; only then must each
/// build's .ipa exist (a runbook shared by a simulated lab and a lab with phones names
/// .ipa files the simulated lab does not have).
pub(crate) fn read_builds(f: Option<Field>, p: &mut Problems, base: &Path, ios_devices: bool) -> Vec<Build> {
    let Some(f) = f else {
        p.push(
            None,
            "builds",
            "no builds",
            "add at least one build, e.g. `[builds.app]` with `baseline = true` and a `[builds.app.sim]` table",
        );
        return Vec::new();
    };
    let Some(t) = f.table(p) else {
        return Vec::new();
    };
    if t.is_empty() {
        f.problem(p, "no builds", "add at least one build, e.g. `[builds.app]` with `baseline = true`");
        return Vec::new();
    }

    let mut names = NameSet::new("build");
    let mut builds = Vec::new();
    let mut baselines: Vec<(String, Option<std::ops::Range<usize>>)> = Vec::new();
    // A build whose `baseline` is unreadable might be the baseline: then do not also
    // claim that there is none.
    let mut baseline_unknown = false;
    for bf in t.fields() {
        let name_ok = check_name(p, bf.span(), &bf.path, "build", &bf.leaf);
        if name_ok {
            names.add(p, &bf.leaf, bf.span(), &bf.path);
        }
        let Some(bt) = bf.table(p) else {
            baseline_unknown = true;
            continue;
        };
        let baseline = match bt.get("baseline") {
            None => Some(false),
            Some(b) => b.bool(p).inspect(|&v| {
                if v {
                    baselines.push((bf.leaf.clone(), b.span()))
                }
            }),
        };
        baseline_unknown |= baseline.is_none();
        if let (Some(build), Some(baseline), true) =
            (read_build(&bt, &bf.leaf, p, base, ios_devices), baseline, name_ok)
        {
            builds.push(Build { baseline, ..build });
        }
    }

    match baselines.len() {
        0 if !baseline_unknown => f.problem(
            p,
            "no build is the baseline",
            "add baseline = true to one build (the one the others are compared with)",
        ),
        0 | 1 => {}
        _ => {
            let named: Vec<String> = baselines.iter().map(|(n, _)| format!("`{n}`")).collect();
            let (last_name, span) = baselines.last().cloned().expect("two or more");
            p.push(
                span,
                &format!("builds.{last_name}.baseline"),
                format!("{} builds have baseline = true: {}", baselines.len(), named.join(", ")),
                "keep baseline = true on exactly one build (the one the others are compared with)",
            );
        }
    }
    builds
}

/// One build's platform tables; `baseline` is filled in by the caller.
fn read_build(t: &Table, name: &str, p: &mut Problems, base: &Path, ios_devices: bool) -> Option<Build> {
    let before = p.len();
    t.check_keys(p, BUILD_KEYS);
    let ios = t.get("ios").and_then(|f| f.table(p)).and_then(|it| read_ios(&it, p, base, ios_devices));
    let android = t.get("android").and_then(|f| f.table(p)).and_then(|at| read_android(&at, p, base));
    let host = t.get("host").and_then(|f| f.table(p)).and_then(|ht| read_host(&ht, p, base));
    let sim = t.get("sim").and_then(|f| f.table(p)).and_then(|st| read_sim_profile(&st, p));
    if !["ios", "android", "host", "sim"].iter().any(|k| t.get(k).is_some()) {
        p.push(
            t.span(),
            t.path(),
            format!("build `{name}` has nothing to run"),
            format!("add at least one of [builds.{name}.sim], [builds.{name}.host], [builds.{name}.android], [builds.{name}.ios]"),
        );
    }
    (p.len() == before).then_some(Build { name: name.to_string(), baseline: false, ios, android, host, sim })
}

fn read_ios(t: &Table, p: &mut Problems, base: &Path, needed: bool) -> Option<IosArtifact> {
    t.check_keys(p, IOS_KEYS);
    let ipa = t.required(p, "ipa", "ipa = \"builds/App.ipa\"").and_then(|f| {
        if needed {
            return existing_file(&f, p, base, "build file");
        }
        // Not installed by this campaign: its hash, if the file is there, is still provenance.
        let path = absolute(&base.join(f.text(p)?));
        let sha256 = sha256_file(&path).unwrap_or_default();
        Some((path, sha256))
    });
    let bundle_id = t.required(p, "bundle_id", "bundle_id = \"com.example.app\"").and_then(|f| f.text(p));
    let (ipa, sha256) = ipa?;
    Some(IosArtifact { ipa, bundle_id: bundle_id?, sha256 })
}

fn read_android(t: &Table, p: &mut Problems, base: &Path) -> Option<AndroidArtifact> {
    t.check_keys(p, ANDROID_KEYS);
    let apks = read_apks(t, p, base);
    let package = t.required(p, "package", "package = \"com.example.app\"").and_then(|f| f.text(p));
    let activity = match t.get("activity") {
        None => Some(None),
        Some(f) => f.text(p).map(Some),
    };
    let apks = apks?;
    let sha256 = match apks.as_slice() {
        [one] => one.sha256.clone(),
        split => {
            let lines: String = split.iter().map(|a| format!("{}\n", a.sha256)).collect();
            crate::seed::sha256_hex(lines.as_bytes())
        }
    };
    Some(AndroidArtifact { apks, package: package?, activity: activity?, sha256 })
}

/// `apk = "app.apk"`, or split APKs `apks = ["base.apk", "split_config.arm64_v8a.apk"]`.
fn read_apks(t: &Table, p: &mut Problems, base: &Path) -> Option<Vec<ApkFile>> {
    match (t.get("apk"), t.get("apks")) {
        (Some(_), Some(list)) => {
            list.key_problem(
                p,
                "`apk` and `apks` are both given",
                "keep `apk = \"app.apk\"` for one APK, or `apks = [\"base.apk\", ...]` for split APKs (base first)",
            );
            None
        }
        (Some(one), None) => {
            let (path, sha256) = existing_file(&one, p, base, "build file")?;
            Some(vec![ApkFile { path, sha256 }])
        }
        (None, Some(list)) => read_split_apks(&list, p, base),
        (None, None) => {
            p.push(
                t.span(),
                &join(t.path(), "apk"),
                "missing required key `apk`",
                format!(
                    "add `apk = \"builds/app.apk\"` (or `apks = [\"base.apk\", ...]` for split APKs) under [{}]",
                    t.path()
                ),
            );
            None
        }
    }
}

fn read_split_apks(list: &Field, p: &mut Problems, base: &Path) -> Option<Vec<ApkFile>> {
    let before = p.len();
    let items = list.strings(p)?;
    if items.is_empty() && p.len() == before {
        list.problem(
            p,
            "no APKs listed",
            "list the base APK first, then its splits: `apks = [\"base.apk\", \"split_config.arm64_v8a.apk\"]`",
        );
    }
    let mut out: Vec<ApkFile> = Vec::new();
    for (i, (written, span)) in items.into_iter().enumerate() {
        let key = format!("{}[{i}]", list.path);
        let Some((path, sha256)) = existing_file_at(p, span.clone(), &key, &written, base, "build file") else {
            continue;
        };
        if out.iter().any(|o| o.path == path) {
            p.push(span, &key, format!("{written} is listed twice"), "list every APK once");
        }
        out.push(ApkFile { path, sha256 });
    }
    (p.len() == before).then_some(out)
}

fn read_host(t: &Table, p: &mut Problems, base: &Path) -> Option<HostCommand> {
    t.check_keys(p, HOST_KEYS);
    let command = t
        .required(p, "command", "command = [\"./server\", \"--port\", \"8080\"]")
        .and_then(|f| read_argv(&f, p, "command = [\"./server\", \"--port\", \"8080\"]"));
    let build = match t.get("build") {
        None => Some(None),
        Some(f) => read_argv(&f, p, "build = [\"cargo\", \"build\", \"--release\"]").map(Some),
    };
    let env = t.get("env").map_or(Some(Default::default()), |f| read_env(&f, p));
    let cwd = match t.get("cwd") {
        None => Some(None),
        Some(f) => existing_dir(&f, p, base).map(Some),
    };
    Some(HostCommand { command: command?, build: build?, env: env?, cwd: cwd? })
}

/// A program and its arguments: a non-empty list of strings whose first is not blank.
fn read_argv(f: &Field, p: &mut Problems, example: &str) -> Option<Vec<String>> {
    let before = p.len();
    let argv: Vec<String> = f.strings(p)?.into_iter().map(|(s, _)| s).collect();
    if p.len() != before {
        return None;
    }
    if argv.first().is_none_or(|a| a.trim().is_empty()) {
        f.problem(
            p,
            format!("the {} is empty", if f.leaf == "build" { "build command" } else { "command" }),
            format!("write the program and its arguments, e.g. `{example}`"),
        );
        return None;
    }
    Some(argv)
}

/// `env = { KEY = "value" }`: names must be usable as environment variable names.
pub(crate) fn read_env(f: &Field, p: &mut Problems) -> Option<BTreeMap<String, String>> {
    let usable = |k: &str| !k.is_empty() && !k.contains('=') && !k.contains('\0');
    read_env_where(f, p, usable, "use a name without `=`, e.g. LOG_LEVEL")
}

/// `read_env` with a rule for names: `valid`, and `fix` for a name that breaks it.
pub(crate) fn read_env_where(
    f: &Field,
    p: &mut Problems,
    valid: impl Fn(&str) -> bool,
    fix: &str,
) -> Option<BTreeMap<String, String>> {
    let t = f.table(p)?;
    let before = p.len();
    let mut env = BTreeMap::new();
    for kf in t.fields() {
        let Some(v) = kf.str(p) else { continue };
        if valid(&kf.leaf) {
            env.insert(kf.leaf.clone(), v.to_string());
        } else {
            kf.key_problem(p, format!("\"{}\" is not a valid environment variable name", kf.leaf), fix);
        }
    }
    (p.len() == before).then_some(env)
}

fn read_sim_profile(t: &Table, p: &mut Problems) -> Option<SimProfile> {
    t.check_keys(p, SIM_KEYS);
    let ge0 = |v: f64| v >= 0.0;
    let num = |p: &mut Problems, key: &str, example: &str| {
        t.required(p, key, example).and_then(|f| f.number_where(p, ge0, "≥ 0"))
    };
    let cpu_pct = num(p, "cpu_pct", "cpu_pct = 10");
    let wakeups_per_s = num(p, "wakeups_per_s", "wakeups_per_s = 20");
    let memory_mb = num(p, "memory_mb", "memory_mb = 30");
    let frac = |p: &mut Problems, key: &str| match t.get(key) {
        None => Some(0.0),
        Some(f) => f.fraction_in(p, 0.0, 1.0, false),
    };
    let cache_hit_ratio = frac(p, "cache_hit_ratio");
    let crash_probability = frac(p, "crash_probability");
    let build_id = match t.get("build_id") {
        None => Some(None),
        Some(f) => f.text(p).map(Some),
    };
    Some(SimProfile {
        cpu_pct: cpu_pct?,
        wakeups_per_s: wakeups_per_s?,
        memory_mb: memory_mb?,
        cache_hit_ratio: cache_hit_ratio?,
        crash_probability: crash_probability?,
        build_id: build_id?,
    })
}
