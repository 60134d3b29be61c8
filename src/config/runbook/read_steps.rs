//! `[[steps]]`: operator steps of a runbook.

use crate::config::runbook::steps::{AttestKey, OperatorStep, StepWhen};
use crate::config::syntax::names::{NameSet, check_name};
use crate::config::syntax::problems::Problems;
use crate::config::syntax::suggest::closest;
use crate::config::syntax::table::Field;

const STEP_KEYS: &[&str] = &["name", "text", "when", "confirm", "attest"];

/// Names the lab's own operator steps use (the manual tether's).
pub const RESERVED_STEP_NAMES: &[&str] = &["unplug", "plug-in"];

pub(crate) fn read_steps(f: Option<Field>, p: &mut Problems) -> Vec<OperatorStep> {
    let Some(f) = f else { return Vec::new() };
    let Some(tables) = f.tables(p) else { return Vec::new() };
    let mut names = NameSet::new("step");
    let mut out = Vec::new();
    for (i, t) in tables.iter().enumerate() {
        let before = p.len();
        t.check_keys(p, STEP_KEYS);
        let default_name = format!("step-{}", i + 1);
        let name = match t.get("name") {
            Some(nf) => nf.text(p).filter(|n| {
                if !check_name(p, nf.span(), &nf.path, "step", n) {
                    return false;
                }
                if RESERVED_STEP_NAMES.contains(&n.as_str()) {
                    nf.problem(
                        p,
                        format!("step name `{n}` is the manual tether's own step"),
                        "give the step another name",
                    );
                    return false;
                }
                names.add(p, n, nf.span(), &nf.path);
                true
            }),
            None => {
                names.add(p, &default_name, t.span(), t.path());
                Some(default_name)
            }
        };
        let text = t
            .required(p, "text", "text = \"Set the screen brightness to 50 %\"")
            .and_then(|tf| tf.text(p))
            .filter(|s| !s.trim().is_empty());
        let options: Vec<&'static str> = StepWhen::ALL.iter().map(|w| w.as_str()).collect();
        let when = t
            .required(p, "when", "when = \"before-trial\"")
            .and_then(|wf| wf.one_of(p, &options))
            .and_then(StepWhen::parse);
        let attest = t.get("attest").map_or(Some(Vec::new()), |af| read_attest(&af, p));
        let confirm = match t.get("confirm") {
            Some(cf) => {
                let c = cf.bool(p);
                if c == Some(false) && attest.as_ref().is_some_and(|a| !a.is_empty()) {
                    cf.problem(
                        p,
                        "a step that attests must be confirmed",
                        "remove `confirm = false`, or the `attest` list",
                    );
                }
                c
            }
            None => Some(true),
        };
        if p.len() != before {
            continue;
        }
        if let (Some(name), Some(text), Some(when), Some(confirm), Some(attest)) = (name, text, when, confirm, attest) {
            out.push(OperatorStep { name, text, when, confirm, attest });
        }
    }
    out
}

fn read_attest(f: &Field, p: &mut Problems) -> Option<Vec<AttestKey>> {
    let known: Vec<&'static str> = AttestKey::ALL.iter().map(|k| k.as_str()).collect();
    let mut out = Vec::new();
    for (s, span) in f.strings(p)? {
        match AttestKey::parse(&s) {
            Some(k) if out.contains(&k) => {
                p.push(span, &f.path, format!("`{s}` is attested twice"), "list each setting once");
                return None;
            }
            Some(k) => out.push(k),
            None => {
                let fix = match closest(&s, &known) {
                    Some(c) => format!("did you mean \"{c}\"?"),
                    None => format!("attest one of {}", known.join(", ")),
                };
                p.push(span, &f.path, format!("unknown setting `{s}` to attest"), fix);
                return None;
            }
        }
    }
    Some(out)
}
