//! `ConfirmPlan`: the runbook of a confirmation campaign. A scheduled campaign's finding
//! (a `worse` verdict, a new change point) is checked by running the reference
//! campaign's build of that variant (`before`, the baseline) and the current one
//! (`after`) interleaved on the same devices — `order = "balanced"`: every block of a
//! device runs both, shuffled — with the trials per arm the sample-size advice asks for.
//! Everything else (duration, workload, preconditions, statistics, steps) is the current
//! campaign's, so the same verdict rule decides.

use std::path::{Path, PathBuf};

use serde::Serialize;
use toml_edit::{DocumentMut, Item, Table, value};

use super::build_cache::BuildCache;
use crate::plan::Variant;

/// A campaign as a confirmation needs it: its stored runbook and build hashes.
#[derive(Debug, Clone, Copy)]
pub struct CampaignSide<'a> {
    pub id: &'a str,
    pub runbook_text: &'a str,
    /// Where the runbook was read from (its relative paths resolve from its folder).
    pub runbook_path: &'a Path,
    /// The campaign's `content_hashes` (`{builds: {NAME: {ios|android|host|sim: sha256}}}`).
    pub content_hashes: &'a serde_json::Value,
}

/// What to confirm.
#[derive(Debug, Clone)]
pub struct ConfirmRequest<'a> {
    pub schedule: &'a str,
    pub due_utc: &'a str,
    /// The flagged variant, as the current campaign's plan names it.
    pub variant: &'a Variant,
    pub current: CampaignSide<'a>,
    /// The campaign whose build of the variant is the `before` arm.
    pub reference: CampaignSide<'a>,
    /// The devices of the flagged models in the current campaign.
    pub devices: Vec<String>,
    pub trials_per_arm: u32,
    /// The current campaign's seed.
    pub seed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConfirmPlan {
    pub variant: String,
    pub trials_per_arm: u32,
    pub before: String,
    pub after: String,
    pub seed: u64,
    /// The runbook, TOML.
    pub text: String,
    /// Where it is read as being (next to the schedule's runbook; never written there).
    pub source: PathBuf,
}

/// Why a finding cannot be confirmed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unconfirmable(pub String);

/// Writes the confirmation runbook.
pub fn confirm_plan(req: &ConfirmRequest<'_>, cache: &BuildCache) -> Result<ConfirmPlan, Unconfirmable> {
    let parse = |side: &CampaignSide<'_>| {
        side.runbook_text
            .parse::<DocumentMut>()
            .map_err(|e| Unconfirmable(format!("campaign {}: stored runbook is not TOML: {e}", side.id)))
    };
    let mut doc = parse(&req.current)?;
    let reference = parse(&req.reference)?;
    let build = &req.variant.build;
    let build_table = |doc: &DocumentMut, side: &CampaignSide<'_>| -> Result<Table, Unconfirmable> {
        let t = doc
            .get("builds")
            .and_then(|b| b.get(build.as_str()))
            .and_then(Item::as_table)
            .ok_or_else(|| Unconfirmable(format!("campaign {} has no build {build}", side.id)))?;
        let mut t = t.clone();
        t.remove("baseline");
        pin_artifacts(&mut t, build, side, cache)?;
        Ok(t)
    };
    let mut before = build_table(&reference, &req.reference)?;
    let after = build_table(&doc, &req.current)?;
    before.insert("baseline", value(true));
    let mut builds = Table::new();
    builds.set_implicit(true);
    builds.insert("before", Item::Table(before));
    builds.insert("after", Item::Table(after));
    // Tables copied from two files keep their places in them; drop those so each
    // build's tables are written together.
    unplace(&mut builds);

    let name = doc.get("name").and_then(Item::as_str).unwrap_or("runbook").to_string();
    let confirm_name = format!("{name}-confirm");
    doc.insert("name", value(&confirm_name));
    doc.insert(
        "description",
        value(format!(
            "Confirmation for schedule {} slot {}: variant {} as built in campaign {} (before) \
             against campaign {} (after), interleaved on the same devices",
            req.schedule, req.due_utc, req.variant.name, req.reference.id, req.current.id
        )),
    );
    doc.insert("repeats", value(i64::from(req.trials_per_arm)));
    doc.insert("order", value("balanced"));
    let seed = crate::seed::derive(req.seed, &["confirm", req.schedule, req.due_utc, &req.variant.name]);
    // TOML integers are signed 64-bit; the runbook's seed key reads them back as such.
    doc.insert("seed", value((seed >> 1) as i64));
    let mut devices = toml_edit::Array::new();
    for d in &req.devices {
        devices.push(d.as_str());
    }
    doc.insert("devices", value(devices));
    doc.insert("builds", Item::Table(builds));
    if let Some(configs) = doc.get_mut("configs").and_then(Item::as_table_mut) {
        let keep = req.variant.config.clone();
        let names: Vec<String> = configs.iter().map(|(k, _)| k.to_string()).filter(|k| *k != keep).collect();
        for n in names {
            configs.remove(&n);
        }
    }
    let source = req.current.runbook_path.with_file_name(format!("{confirm_name}.toml"));
    Ok(ConfirmPlan {
        variant: req.variant.name.clone(),
        trials_per_arm: req.trials_per_arm,
        before: req.reference.id.to_string(),
        after: req.current.id.to_string(),
        seed: seed >> 1,
        text: doc.to_string(),
        source,
    })
}

fn unplace(t: &mut Table) {
    t.set_position(None);
    for (_, item) in t.iter_mut() {
        if let Some(sub) = item.as_table_mut() {
            unplace(sub);
        }
    }
}

/// Points a build's phone artifacts at files that still are the build the campaign ran:
/// its copy in the build cache, or the original file when its bytes have not changed.
fn pin_artifacts(t: &mut Table, build: &str, side: &CampaignSide<'_>, cache: &BuildCache) -> Result<(), Unconfirmable> {
    let dir = side.runbook_path.parent().unwrap_or(Path::new("."));
    let hash = |platform: &str| {
        side.content_hashes["builds"][build][platform].as_str().map(str::to_string).ok_or_else(|| {
            Unconfirmable(format!("campaign {}: no stored hash for the {platform} build of {build}", side.id))
        })
    };
    let pin = |written: &str, build_sha: &str, file_sha: Option<&str>| -> Result<String, Unconfirmable> {
        let original = dir.join(written);
        let name = original.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if let Some(p) = cache.path(build_sha, &name) {
            return Ok(p.display().to_string());
        }
        let unchanged =
            std::fs::read(&original).ok().is_some_and(|b| file_sha.is_some_and(|s| crate::seed::sha256_hex(&b) == s));
        if unchanged {
            return Ok(original.display().to_string());
        }
        Err(Unconfirmable(format!(
            "the {build} build of campaign {} ({written}, sha256 {}) is no longer on disk and no copy was kept; \
             fix: run scheduled campaigns with this lab version (it keeps each build in artifacts/{}), or restore the file",
            side.id,
            &build_sha[..build_sha.len().min(12)],
            super::build_cache::CACHE_DIR
        )))
    };
    if let Some(ios) = t.get_mut("ios").and_then(Item::as_table_like_mut) {
        let sha = hash("ios")?;
        if let Some(written) = ios.get("ipa").and_then(Item::as_str).map(str::to_string) {
            ios.insert("ipa", value(pin(&written, &sha, Some(&sha))?));
        }
    }
    if let Some(android) = t.get_mut("android").and_then(Item::as_table_like_mut) {
        let sha = hash("android")?;
        if let Some(written) = android.get("apk").and_then(Item::as_str).map(str::to_string) {
            android.insert("apk", value(pin(&written, &sha, Some(&sha))?));
        }
        if let Some(list) = android.get("apks").and_then(Item::as_array) {
            // A split build's hash is over its files' hashes: only the cache can tell.
            let written: Vec<String> = list.iter().filter_map(|v| v.as_str().map(str::to_string)).collect();
            let mut pinned = toml_edit::Array::new();
            for w in &written {
                pinned.push(pin(w, &sha, None)?);
            }
            android.insert("apks", value(pinned));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEEK1: &str = r#"name = "weekly-envoy"
description = "x"
duration = "30m"
repeats = { min = 4, max = 12, target_ci = 0.05 }
seed = 11
devices = ["model:iPhone 6s"]

[builds.control]
baseline = true
[builds.control.sim]
cpu_pct = 12
wakeups_per_s = 15
memory_mb = 6

[builds.envoy-poll]
[builds.envoy-poll.sim]
cpu_pct = 185
wakeups_per_s = 1000
memory_mb = 12
build_id = "nightly-1"

[configs.default]
[configs.slow]
sim = { cpu_scale = 0.5 }

[workload]
request_interval = "1s"
"#;

    fn variant() -> Variant {
        Variant {
            name: "envoy-poll".into(),
            build: "envoy-poll".into(),
            config: "default".into(),
            baseline_build: false,
            default_config: true,
        }
    }

    fn side<'a>(id: &'a str, text: &'a str, hashes: &'a serde_json::Value) -> CampaignSide<'a> {
        CampaignSide { id, runbook_text: text, runbook_path: Path::new("/lab/weekly.toml"), content_hashes: hashes }
    }

    #[test]
    fn the_confirmation_interleaves_the_reference_build_with_the_current_one_on_the_same_devices() {
        let week8 = WEEK1.replace("cpu_pct = 185", "cpu_pct = 203.5").replace("nightly-1", "nightly-8");
        let none = serde_json::json!({});
        let req = ConfirmRequest {
            schedule: "weekly",
            due_utc: "2026-02-23T03:00:00Z",
            variant: &variant(),
            current: side("weekly-envoy-8", &week8, &none),
            reference: side("weekly-envoy-7", WEEK1, &none),
            devices: vec!["sim-iphone-1".into(), "sim-iphone-2".into()],
            trials_per_arm: 10,
            seed: 5,
        };
        let dir = tempfile::tempdir().unwrap();
        let plan = confirm_plan(&req, &BuildCache::new(dir.path())).unwrap();
        assert_eq!(
            (plan.before.as_str(), plan.after.as_str(), plan.trials_per_arm),
            ("weekly-envoy-7", "weekly-envoy-8", 10)
        );
        assert_eq!(plan.source, Path::new("/lab/weekly-envoy-confirm.toml"));
        insta::assert_snapshot!(plan.text);
        // It reads as a runbook of the lab, whose builds are exactly the two campaigns'.
        let lab = crate::config::parse_lab(
            &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/lab.toml")).unwrap(),
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/lab.toml")),
        )
        .unwrap();
        let rb = crate::config::parse_runbook(&plan.text, &plan.source, &lab).unwrap();
        let sim = |text: &str, name: &str| {
            let r = crate::config::parse_runbook(text, Path::new("/lab/weekly.toml"), &lab).unwrap();
            serde_json::to_string(&r.builds.iter().find(|b| b.name == name).unwrap().sim).unwrap()
        };
        let hash = |name: &str| serde_json::to_string(&rb.builds.iter().find(|b| b.name == name).unwrap().sim).unwrap();
        assert_eq!(hash("before"), sim(WEEK1, "envoy-poll"));
        assert_eq!(hash("after"), sim(&week8, "envoy-poll"));
        assert_eq!(rb.baseline().name, "before");
        assert_eq!((rb.repeats, rb.adaptive.is_none(), rb.configs.len()), (10, true, 1));
        assert_eq!(rb.order, crate::config::Order::Balanced);
        // A re-run of the same slot gets the same seed; another slot another.
        let again = confirm_plan(&req, &BuildCache::new(dir.path())).unwrap();
        let other = confirm_plan(
            &ConfirmRequest { due_utc: "2026-03-02T03:00:00Z", ..req.clone() },
            &BuildCache::new(dir.path()),
        )
        .unwrap();
        assert_eq!((again.seed, rb.seed), (plan.seed, plan.seed));
        assert_ne!(other.seed, plan.seed);
    }

    #[test]
    fn an_overwritten_phone_build_is_taken_from_the_cache_or_is_unconfirmable() {
        let dir = tempfile::tempdir().unwrap();
        let runbook_path = dir.path().join("weekly.toml");
        std::fs::write(dir.path().join("App.ipa"), b"nightly 7").unwrap();
        let text =
            "name = \"w\"\n[builds.app]\nbaseline = true\n[builds.app.ios]\nipa = \"App.ipa\"\nbundle_id = \"a.b\"\n";
        let sha7 = crate::seed::sha256_hex(b"nightly 7");
        let hashes = serde_json::json!({ "builds": { "app": { "ios": sha7 } } });
        let v = Variant {
            name: "app".into(),
            build: "app".into(),
            config: "default".into(),
            baseline_build: true,
            default_config: true,
        };
        let s = |id| CampaignSide { id, runbook_text: text, runbook_path: &runbook_path, content_hashes: &hashes };
        let req = ConfirmRequest {
            schedule: "weekly",
            due_utc: "2026-02-23T03:00:00Z",
            variant: &v,
            current: s("w-8"),
            reference: s("w-7"),
            devices: vec!["iphone".into()],
            trials_per_arm: 10,
            seed: 1,
        };
        let cache = BuildCache::new(&dir.path().join("artifacts"));
        // The file is still that build: used where it is.
        let plan = confirm_plan(&req, &cache).unwrap();
        assert!(plan.text.contains(&dir.path().join("App.ipa").display().to_string()), "{}", plan.text);
        // Overwritten by the next nightly, with no copy kept: unconfirmable, saying why.
        std::fs::write(dir.path().join("App.ipa"), b"nightly 8").unwrap();
        let e = confirm_plan(&req, &cache).unwrap_err();
        assert!(e.0.contains("is no longer on disk and no copy was kept"), "{e}");
        // Kept in the cache: the copy is used.
        std::fs::create_dir_all(dir.path().join("artifacts/_builds").join(&sha7)).unwrap();
        std::fs::write(dir.path().join("artifacts/_builds").join(&sha7).join("App.ipa"), b"nightly 7").unwrap();
        let plan = confirm_plan(&req, &cache).unwrap();
        assert!(plan.text.contains(&format!("_builds/{sha7}/App.ipa")), "{}", plan.text);
    }
}
