//! Sequential designs sized from a power (`repeats = { stop = "decided", power = 0.9 }`,
//! issue 48) through the real binary on the default lab's simulated phones: refused with
//! its fix while the lab has no noise figure, sized from `lab noise`'s figure once it has
//! one (and `lab plan` naming the campaigns), run in equal blocks, and stopped with the
//! verdicts the design offers.

use crate::common;

use common::TempLab;
use serde_json::Value;

const SIZED: &str = "repeats = { stop = \"decided\", power = 0.9, looks = 3 }";

fn aa(repeats: &str, seed: u64) -> String {
    let text = std::fs::read_to_string(common::root().join("runbooks/aa-identical.toml")).unwrap();
    assert!(text.contains("\nrepeats = 6\n") && text.contains("\nseed = 1\n"));
    text.replace("\nrepeats = 6\n", &format!("\n{repeats}\n")).replace("\nseed = 1\n", &format!("\nseed = {seed}\n"))
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn a_design_sized_from_the_labs_noise_runs_in_blocks_and_is_decided() {
    let lab = TempLab::new();
    let sized = lab.dir.path().join("sized.toml");
    std::fs::write(&sized, aa(SIZED, 7)).unwrap();

    // No store yet: no noise figure, so the design cannot be sized. Nothing is created.
    let out = lab.cmd(&["plan", sized.to_str().unwrap()]).assert().code(2).get_output().clone();
    assert!(stderr(&out).contains("names no `cv`, and the lab has no noise figure"), "{}", stderr(&out));
    assert!(stderr(&out).contains("cv = \\\"5%\\\"") || stderr(&out).contains("cv = \"5%\""), "{}", stderr(&out));
    assert!(!lab.store().exists(), "planning created the store");
    let out = lab.cmd(&["run", sized.to_str().unwrap()]).assert().code(2).get_output().clone();
    assert!(stderr(&out).contains("no noise figure"), "{}", stderr(&out));
    assert!(!lab.store().exists());

    // Bad keys: one line each, naming the key and the fix.
    for (repeats, says) in [
        ("repeats = { power = 0.9 }", "`power` without `stop = \"decided\"`"),
        ("repeats = { stop = \"decided\", power = 0.9, max = 30 }", "`max` with `power`"),
        ("repeats = { stop = \"decided\", power = 1.5 }", "must be greater than 0.5 and less than 1"),
        ("repeats = { min = 3, max = 30, stop = \"decided\", looks = 4 }", "`looks` without `power`"),
        ("repeats = { stop = \"decided\", power = 0.9, looks = 0 }", "repeats.looks"),
    ] {
        let bad = lab.dir.path().join("bad.toml");
        std::fs::write(&bad, aa(repeats, 7)).unwrap();
        let out = lab.cmd(&["plan", bad.to_str().unwrap()]).assert().code(2).get_output().clone();
        assert!(stderr(&out).contains(says), "{repeats}: {}", stderr(&out));
    }

    // A fixed A/A campaign gives the lab its noise floor.
    let fixed = lab.dir.path().join("aa.toml");
    std::fs::write(&fixed, aa("repeats = 6", 1)).unwrap();
    lab.cmd(&["run", fixed.to_str().unwrap()]).assert().success();
    let first = lab.campaigns();
    assert_eq!(first.len(), 1);

    let out = lab.cmd(&["plan", sized.to_str().unwrap()]).assert().success().get_output().stdout.clone();
    let text = String::from_utf8_lossy(&out).to_string();
    let line =
        text.lines().find(|l| l.starts_with("sequential repeats sized for 90 % power")).expect(&text).to_string();
    assert!(line.contains("3 looks, after ") && line.contains("the lab's noise floor over 1 campaigns"), "{line}");
    let noise = text.lines().find(|l| l.starts_with("noise floor: CV")).expect(&text);
    assert!(noise.ends_with(&first[0]), "{noise}");

    // The plan is sized: its first round is the first look's block, and the stored plan
    // keeps the CV and the looks, so a resume or an agent decides the same way.
    let json = lab.cmd(&["plan", sized.to_str().unwrap(), "--json"]).assert().success().get_output().stdout.clone();
    let plan: Value = serde_json::from_slice(&json).unwrap();
    let rule = &plan["adaptive"];
    let (min, max) = (rule["min"].as_u64().unwrap(), rule["max"].as_u64().unwrap());
    assert_eq!(rule["power"]["looks"], 3);
    assert!(rule["power"]["cv"].as_f64().unwrap() > 0.0);
    assert!(min >= 4 && max >= min, "{rule}");
    assert_eq!(plan["repeats"].as_u64(), Some(min));

    lab.cmd(&["run", sized.to_str().unwrap()]).assert().success();
    let id = lab.campaigns().into_iter().find(|c| !first.contains(c)).expect("the sized campaign");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.artifacts().join(&id).join("report.json")).unwrap()).unwrap();
    // Blocks: every pair stopped at one of the planned looks' counts.
    let looks: Vec<u64> = (1..=3).map(|j| (max * j).div_ceil(3).max(min)).collect();
    for model in report["models"].as_array().unwrap() {
        let v = &model["verdicts"][0];
        let stop = &v["sequential"];
        let n = stop["n_treatment"].as_u64().unwrap();
        assert!(looks.contains(&n), "{n} not among the looks {looks:?}: {v}");
        // Identical builds: never a change; stopped `same` or with no change as large as
        // twice the threshold, or still inconclusive at the last look.
        let verdict = v["verdict"].as_str().unwrap();
        assert!(["same", "no_large_change", "inconclusive"].contains(&verdict), "{v}");
        assert!(verdict == "inconclusive" || n <= max, "{v}");
        if verdict == "no_large_change" {
            let summary = v["summary"].as_str().unwrap();
            assert!(summary.contains("no change as large as ±10% (twice the practical threshold)"), "{summary}");
        }
    }
}
