//! `[configs.NAME]`: the config variants every build is run with.

use std::path::{Component, Path};

use crate::config::runbook::read_builds::read_env;
use crate::config::runbook::read_launch::{read_android_launch, read_args, read_ios_launch};
use crate::config::syntax::files::existing_file;
use crate::config::syntax::names::{NameSet, check_name};
use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::{Field, Table};
use crate::config::{AndroidLaunch, IosLaunch, PushFile, SimAdjust, VariantConfig};

const CONFIG_KEYS: &[&str] = &["env", "args", "files", "sim", "android", "ios"];
const FILE_KEYS: &[&str] = &["src", "dest"];
const SIM_KEYS: &[&str] = &["cpu_scale", "wakeups_scale", "memory_mb_add", "cache_hit_ratio", "crash_probability"];

/// Reads `[configs]`; absent (or empty) gives the single config `default`.
pub(crate) fn read_configs(f: Option<Field>, p: &mut Problems, base: &Path) -> Vec<VariantConfig> {
    let Some(t) = f.and_then(|f| f.table(p)) else {
        return vec![VariantConfig::default_config()];
    };
    if t.is_empty() {
        return vec![VariantConfig::default_config()];
    }
    let mut names = NameSet::new("config");
    let mut configs = Vec::new();
    for cf in t.fields() {
        let name_ok = check_name(p, cf.span(), &cf.path, "config", &cf.leaf);
        if name_ok {
            names.add(p, &cf.leaf, cf.span(), &cf.path);
        }
        let Some(ct) = cf.table(p) else { continue };
        if let (Some(c), true) = (read_config(&ct, &cf.leaf, p, base), name_ok) {
            configs.push(c);
        }
    }
    configs
}

fn read_config(t: &Table, name: &str, p: &mut Problems, base: &Path) -> Option<VariantConfig> {
    t.check_keys(p, CONFIG_KEYS);
    let env = t.get("env").map_or(Some(Default::default()), |f| read_env(&f, p));
    let args = t.get("args").map_or(Some(Vec::new()), |f| read_args(&f, p));
    let files = t.get("files").map_or(Some(Vec::new()), |f| read_files(&f, p, base));
    let sim = t.get("sim").map_or(Some(SimAdjust::default()), |f| f.table(p).and_then(|st| read_adjust(&st, p)));
    let android = t
        .get("android")
        .map_or(Some(AndroidLaunch::default()), |f| f.table(p).and_then(|at| read_android_launch(&at, p)));
    let ios = t.get("ios").map_or(Some(IosLaunch::default()), |f| f.table(p).and_then(|it| read_ios_launch(&it, p)));
    Some(VariantConfig {
        name: name.to_string(),
        env: env?,
        args: args?,
        files: files?,
        sim: sim?,
        android: android?,
        ios: ios?,
    })
}

/// `files = [{ src = "...", dest = "..." }]`: pushed into the app's data folder.
fn read_files(f: &Field, p: &mut Problems, base: &Path) -> Option<Vec<PushFile>> {
    let before = p.len();
    let mut out: Vec<PushFile> = Vec::new();
    for ft in f.tables(p)? {
        ft.check_keys(p, FILE_KEYS);
        let src = ft
            .required(p, "src", "src = \"configs/app.json\"")
            .and_then(|sf| existing_file(&sf, p, base, "config file"));
        let dest = ft.required(p, "dest", "dest = \"app.json\"").and_then(|df| {
            let d = df.text(p)?;
            let escapes = Path::new(&d).components().any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
            if escapes {
                df.problem(
                    p,
                    format!("dest \"{d}\" leaves the app's data folder"),
                    "write a path relative to the app's data folder, without `..` or a leading `/`",
                );
                return None;
            }
            if out.iter().any(|o| o.dest == d) {
                df.problem(p, format!("two files are pushed to \"{d}\""), "give every file its own dest");
                return None;
            }
            Some(d)
        });
        if let (Some((src, sha256)), Some(dest)) = (src, dest) {
            out.push(PushFile { src, dest, sha256 });
        }
    }
    (p.len() == before).then_some(out)
}

fn read_adjust(t: &Table, p: &mut Problems) -> Option<SimAdjust> {
    let before = p.len();
    t.check_keys(p, SIM_KEYS);
    let mut a = SimAdjust::default();
    let ge0 = |v: f64| v >= 0.0;
    if let Some(v) = t.get("cpu_scale").and_then(|f| f.number_where(p, ge0, "≥ 0")) {
        a.cpu_scale = v;
    }
    if let Some(v) = t.get("wakeups_scale").and_then(|f| f.number_where(p, ge0, "≥ 0")) {
        a.wakeups_scale = v;
    }
    if let Some(v) = t.get("memory_mb_add").and_then(|f| f.number(p)) {
        a.memory_mb_add = v;
    }
    a.cache_hit_ratio = t.get("cache_hit_ratio").and_then(|f| f.fraction_in(p, 0.0, 1.0, false));
    a.crash_probability = t.get("crash_probability").and_then(|f| f.fraction_in(p, 0.0, 1.0, false));
    (p.len() == before).then_some(a)
}
