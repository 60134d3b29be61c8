//! `lab rerun` and `lab run --from-manifest`, through the real binary: a re-run of a
//! simulated campaign measures exactly what the first run did; a changed build is refused
//! and changes nothing, unless allowed, and then the report says so.

use crate::common;

use common::TempLab;

const RUNBOOK: &str = r#"name = "rerun-check"
duration = "10m"
repeats = 2
seed = 3
devices = ["tag:phone"]

[builds.base]
baseline = true
[builds.base.android]
apk = "app.apk"
package = "org.example.app"
activity = ".Main"
[builds.base.sim]
cpu_pct = 5
wakeups_per_s = 5
memory_mb = 20

[builds.next]
[builds.next.sim]
cpu_pct = 9
wakeups_per_s = 5
memory_mb = 20

[workload]
request_interval = "1s"
"#;

/// The default lab with a runbook whose baseline has a build file (an APK the simulated
/// phones never install, but whose hash the campaign keeps), run once.
fn lab_with_a_campaign() -> (TempLab, String) {
    let lab = TempLab::new();
    std::fs::write(lab.dir.path().join("app.apk"), b"PK not really an apk, v1").unwrap();
    let rb = lab.dir.path().join("rerun-check.toml");
    std::fs::write(&rb, RUNBOOK).unwrap();
    lab.cmd(&["run", rb.to_str().unwrap()]).assert().success();
    let id = lab.campaigns().remove(0);
    (lab, id)
}

fn read(lab: &TempLab, id: &str, file: &str) -> String {
    std::fs::read_to_string(lab.artifacts().join(id).join(file)).unwrap()
}

#[test]
fn a_rerun_measures_byte_for_byte_what_the_campaign_did_and_compares_the_two() {
    let (lab, first) = lab_with_a_campaign();
    let manifest: serde_json::Value = serde_json::from_str(&read(&lab, &first, "manifest.json")).unwrap();
    assert_eq!(manifest["manifest_version"], 1);
    assert_eq!((manifest["campaign"].as_str(), manifest["seed"].as_u64()), (Some(first.as_str()), Some(3)));
    assert_eq!(manifest["runbook"]["text"], RUNBOOK);
    assert_eq!(manifest["lab_version"], env!("CARGO_PKG_VERSION"));
    let apk_sha = manifest["builds"]["base"]["android"].as_str().unwrap();
    assert_eq!(apk_sha.len(), 64);
    assert_eq!(manifest["variants"].as_array().unwrap().len(), 2);
    let plan: Vec<String> = lab.sql(&format!("SELECT plan_json FROM campaigns WHERE id = '{first}'"));
    assert_eq!(manifest["plan_sha256"].as_str(), Some(lab::seed::sha256_hex(plan[0].as_bytes()).as_str()));
    assert!(manifest["runbook"]["path"].as_str().unwrap().starts_with('/'), "absolute");
    // Every device, with what it answered before its first trial.
    let devices = manifest["devices"].as_array().unwrap();
    assert!(devices.len() >= 3 && devices.iter().all(|d| d["observed"]["serial"].as_str().is_some()), "{devices:?}");

    let out = lab.cmd(&["rerun", &first]).assert().success().get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    let ids = lab.campaigns();
    assert_eq!(ids.len(), 2);
    let second = ids.iter().find(|i| **i != first).unwrap().clone();
    assert!(out.contains(&format!("re-run of {first} as {second}")), "{out}");
    assert!(out.contains("Δ B vs A") && out.contains("verdicts"), "the comparison follows the run:\n{out}");
    assert_eq!(read(&lab, &first, "results.csv"), read(&lab, &second, "results.csv"), "byte-identical results.csv");
    let m2: serde_json::Value = serde_json::from_str(&read(&lab, &second, "manifest.json")).unwrap();
    assert_eq!(m2["rerun_of"].as_str(), Some(first.as_str()));
    assert!(m2.get("changed_builds").is_none());
    assert!(m2.get("plan_changed").is_none(), "the same lab plans the same trials");
    assert!(read(&lab, &second, "report.md").contains(&format!("- **re-run**: of {first}, with the same builds")));
}

#[test]
fn a_changed_build_is_refused_with_its_hash_and_changes_nothing_unless_allowed() {
    let (lab, first) = lab_with_a_campaign();
    let was = serde_json::from_str::<serde_json::Value>(&read(&lab, &first, "manifest.json")).unwrap()["builds"]["base"]
        ["android"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(lab.dir.path().join("app.apk"), b"PK not really an apk, v2").unwrap();
    let now = lab::seed::sha256_hex(b"PK not really an apk, v2");
    let err = lab.cmd(&["rerun", &first]).assert().code(2).get_output().stderr.clone();
    let err = String::from_utf8(err).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&was) && err.contains(&now) && err.contains("app.apk") && err.contains("--allow-changed-builds"),
        "{err}"
    );
    assert_eq!(lab.campaigns(), std::slice::from_ref(&first), "nothing was created");

    lab.cmd(&["rerun", &first, "--allow-changed-builds"]).assert().success();
    let second = lab.campaigns().into_iter().find(|i| *i != first).unwrap();
    let m2: serde_json::Value = serde_json::from_str(&read(&lab, &second, "manifest.json")).unwrap();
    let changed = m2["changed_builds"][0].as_str().unwrap();
    assert!(changed.contains("build base (android") && changed.contains(&was) && changed.contains(&now), "{changed}");
    let md = read(&lab, &second, "report.md");
    assert!(md.contains("with CHANGED builds: build base (android"), "the report says so");
    let json: serde_json::Value = serde_json::from_str(&read(&lab, &second, "report.json")).unwrap();
    assert_eq!(json["campaign"]["rerun"]["campaign"].as_str(), Some(first.as_str()));
}

#[test]
fn from_manifest_runs_the_same_campaign_on_another_lab_file() {
    let (lab, first) = lab_with_a_campaign();
    // Another lab file (its own name, folder, store and artifacts), given only the manifest.
    let text = std::fs::read_to_string(common::root().join("lab.toml")).unwrap();
    let other = TempLab::from_text(&text.replacen("name = \"", "name = \"other-", 1));
    assert_ne!(std::fs::read_to_string(&other.lab).unwrap(), text);
    let copied = other.dir.path().join("manifest.json");
    std::fs::copy(lab.artifacts().join(&first).join("manifest.json"), &copied).unwrap();
    other.cmd(&["run", "--from-manifest", copied.to_str().unwrap()]).assert().success();
    let ids = other.campaigns();
    assert_eq!(ids.len(), 1);
    assert_eq!(read(&lab, &first, "results.csv"), read(&other, &ids[0], "results.csv"));
    assert_eq!(lab.campaigns(), [first], "the first lab is untouched");

    // On a machine where the runbook's folder does not exist, build files are looked
    // for next to the manifest.
    let mut m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&copied).unwrap()).unwrap();
    m["runbook"]["path"] = "/nowhere/on/this/machine/rerun-check.toml".into();
    std::fs::write(&copied, m.to_string()).unwrap();
    let err =
        other.cmd(&["run", "--from-manifest", copied.to_str().unwrap()]).assert().code(2).get_output().stderr.clone();
    let err = String::from_utf8(err).unwrap();
    assert!(err.contains(&other.dir.path().join("app.apk").display().to_string()), "{err}");
    std::fs::write(other.dir.path().join("app.apk"), b"PK not really an apk, v1").unwrap();
    other.cmd(&["run", "--from-manifest", copied.to_str().unwrap()]).assert().success();
    assert_eq!(other.campaigns().len(), 2);

    // `--on` does the same from the first lab's store, and compares across the two.
    let out = lab.cmd(&["rerun", &lab.campaigns()[0], "--on", other.lab.to_str().unwrap()]).assert().success();
    let out = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert_eq!(other.campaigns().len(), 3);
    assert!(out.contains("verdicts"), "{out}");
}

#[test]
fn a_bad_manifest_or_an_unknown_campaign_is_refused_in_one_line() {
    let lab = TempLab::new();
    let bad = lab.dir.path().join("manifest.json");
    std::fs::write(&bad, "{\"manifest_version\": 99, \"lab_version\": \"9.0.0\"}").unwrap();
    let err = lab.cmd(&["run", "--from-manifest", bad.to_str().unwrap()]).assert().code(2).get_output().stderr.clone();
    let err = String::from_utf8(err).unwrap();
    assert!(err.contains("manifest.json") && err.contains("manifest_version 99") && err.contains("9.0.0"), "{err}");
    std::fs::write(&bad, "not json").unwrap();
    let err = lab.cmd(&["run", "--from-manifest", bad.to_str().unwrap()]).assert().code(2).get_output().stderr.clone();
    assert!(String::from_utf8(err).unwrap().contains("not JSON"));
    lab.cmd(&["run", "runbooks/quickstart.toml"]).assert().success();
    let err = lab.cmd(&["rerun", "no-such-campaign"]).assert().code(2).get_output().stderr.clone();
    assert!(String::from_utf8(err).unwrap().contains("no campaign `no-such-campaign`"));
    assert_eq!(lab.campaigns().len(), 1);
}

#[test]
fn a_campaign_without_a_manifest_is_re_run_from_its_stored_record_and_the_stream_ends_with_the_comparison() {
    let (lab, first) = lab_with_a_campaign();
    // A campaign from before manifests: the store's record is enough.
    std::fs::remove_file(lab.artifacts().join(&first).join("manifest.json")).unwrap();
    let out = lab.cmd(&["rerun", &first, "--message-format", "json"]).assert().success().get_output().clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    assert!(lines.iter().enumerate().all(|(i, v)| v["v"] == 1 && v["seq"].as_u64() == Some(i as u64)), "{stdout}");
    let second = lab.campaigns().into_iter().find(|i| *i != first).unwrap();
    let n = lines.len();
    assert_eq!(lines[n - 2]["event"], "report_written");
    let last = &lines[n - 1];
    assert_eq!((last["event"].as_str(), last["exit_code"].as_u64()), (Some("comparison"), Some(0)));
    assert_eq!((last["before"].as_str(), last["after"].as_str()), (Some(first.as_str()), Some(second.as_str())));
    assert_eq!(last["comparison"]["schema_version"], 2);
    assert_eq!(read(&lab, &first, "results.csv"), read(&lab, &second, "results.csv"));
    // The re-run has its manifest, which names where it came from.
    let m2: serde_json::Value = serde_json::from_str(&read(&lab, &second, "manifest.json")).unwrap();
    assert_eq!(m2["rerun_of"].as_str(), Some(first.as_str()));
}

#[test]
fn a_lab_file_changed_since_gives_another_plan_and_the_rerun_says_so() {
    let (lab, first) = lab_with_a_campaign();
    // One phone fewer: the same runbook plans its trials on the others.
    let text = std::fs::read_to_string(&lab.lab).unwrap();
    let (from, to) = (
        text.find("[[device]]\nname = \"sim-pixel-2\"").unwrap(),
        text.find("[[device]]\nname = \"this-host\"").unwrap(),
    );
    std::fs::write(&lab.lab, format!("{}{}", &text[..from], &text[to..])).unwrap();
    let out = lab.cmd(&["rerun", &first]).assert().get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("note: the plan differs from the campaign's"), "{out}");
    let second = lab.campaigns().into_iter().find(|i| *i != first).unwrap();
    let m2: serde_json::Value = serde_json::from_str(&read(&lab, &second, "manifest.json")).unwrap();
    assert_eq!(m2["plan_changed"], true);
    assert!(read(&lab, &second, "report.md").contains("the plan DIFFERS"));
}
