//! What a config passes to the app per platform: `[configs.NAME.android] extras` (intent
//! extras of the activity start) and `[configs.NAME.ios]` `env` and `args`.

use std::collections::BTreeMap;

use toml_edit::{Item, Value};

use crate::config::runbook::read_builds::read_env_where;
use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::{Field, Table};
use crate::config::{AndroidLaunch, IntentExtra, IosLaunch};

const ANDROID_KEYS: &[&str] = &["extras"];
const IOS_KEYS: &[&str] = &["env", "args"];
const EXTRAS_EXAMPLE: &str = "extras = { dns_refresh_s = 60, trace = true, mode = \"fast\" }";

/// `args = ["--a", "b"]`: a list of strings, every element checked.
pub(crate) fn read_args(f: &Field, p: &mut Problems) -> Option<Vec<String>> {
    let before = p.len();
    let list: Vec<String> = f.strings(p)?.into_iter().map(|(s, _)| s).collect();
    (p.len() == before).then_some(list)
}

pub(crate) fn read_android_launch(t: &Table, p: &mut Problems) -> Option<AndroidLaunch> {
    t.check_keys(p, ANDROID_KEYS);
    let Some(f) = t.get("extras") else {
        return Some(AndroidLaunch::default());
    };
    let et = f.table(p)?;
    let before = p.len();
    let mut extras = BTreeMap::new();
    for kf in et.fields() {
        if !is_extra_name(&kf.leaf) {
            kf.key_problem(
                p,
                format!("\"{}\" is not a plain extra name", kf.leaf),
                "use letters, digits, `_` and `.`, starting with a letter or `_` (e.g. `dns_refresh_s`)",
            );
            continue;
        }
        if let Some(v) = read_extra(&kf, p) {
            extras.insert(kf.leaf.clone(), v);
        }
    }
    (p.len() == before).then_some(AndroidLaunch { extras })
}

/// Intent extra names as apps write them: `trace`, `dns_refresh_s`, `io.envoy.TRACE`.
fn is_extra_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// The extra's type follows the TOML value: string, whole number (a 32-bit `int`),
/// boolean, or number (a `float`).
fn read_extra(f: &Field, p: &mut Problems) -> Option<IntentExtra> {
    match f.item {
        Item::Value(Value::String(s)) => Some(IntentExtra::Str(s.value().clone())),
        Item::Value(Value::Boolean(b)) => Some(IntentExtra::Bool(*b.value())),
        Item::Value(Value::Integer(_)) => {
            let v = f.integer(p)?;
            if i32::try_from(v).is_err() {
                f.problem(
                    p,
                    format!("{v} does not fit an int extra (32 bits)"),
                    format!("pass a larger value as a string: `{} = \"{v}\"`", f.leaf),
                );
                return None;
            }
            Some(IntentExtra::Int(v))
        }
        Item::Value(Value::Float(_)) => {
            let v = f.number(p)?;
            // `am --ef` passes a Java float.
            if !(v as f32).is_finite() {
                f.problem(p, format!("{v} does not fit a float extra"), "write a smaller number, or a string");
                return None;
            }
            Some(IntentExtra::Float(v))
        }
        _ => {
            f.wrong_type(p, "a string, whole number, boolean or number", format!("write e.g. `{EXTRAS_EXAMPLE}`"));
            None
        }
    }
}

pub(crate) fn read_ios_launch(t: &Table, p: &mut Problems) -> Option<IosLaunch> {
    t.check_keys(p, IOS_KEYS);
    let env = t.get("env").map_or(Some(BTreeMap::new()), |f| {
        read_env_where(
            &f,
            p,
            is_portable_env_name,
            "use letters, digits and `_`, not starting with a digit (e.g. ENVOY_TRACE)",
        )
    });
    let args = t.get("args").map_or(Some(Vec::new()), |f| read_args(&f, p));
    Some(IosLaunch { env: env?, args: args? })
}

/// POSIX portable names: what every launcher passes through unchanged.
fn is_portable_env_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
