//! `[care]` of lab.toml: the charge window `lab care` keeps hub-powered phones in.

use toml_edit::Value;

use crate::config::CareSettings;
use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::Table;

const CARE_KEYS: &[&str] = &["charge", "interval"];

/// Reads `[care]`; the defaults where it (or a key) is missing or wrong (then reported).
pub(crate) fn read_care(root: &Table, p: &mut Problems) -> CareSettings {
    let mut care = CareSettings::default();
    let Some(t) = root.get("care").and_then(|f| f.table(p)) else {
        return care;
    };
    t.check_keys(p, CARE_KEYS);
    if let Some(f) = t.get("charge") {
        let fix = "write the window as two percentages, lower first: `charge = [40, 80]`";
        match f.item.as_array() {
            None => f.wrong_type(p, "an array of two percentages", fix),
            Some(a) if a.len() != 2 => {
                f.problem(p, format!("must have two numbers, [lower, upper], got {}", a.len()), fix);
            }
            Some(a) => {
                let mut limits = Vec::new();
                for (i, v) in a.iter().enumerate() {
                    let path = format!("{}[{i}]", f.path);
                    match number(v) {
                        Some(x) if (0.0..=100.0).contains(&x) => limits.push(x),
                        Some(x) => p.push(v.span(), &path, format!("must be between 0 and 100, got {x}"), fix),
                        None => p.push(v.span(), &path, format!("expected a number, found {}", v.type_name()), fix),
                    }
                }
                if let [lower, upper] = limits[..] {
                    if lower < upper {
                        (care.lower_pct, care.upper_pct) = (lower, upper);
                    } else {
                        f.problem(
                            p,
                            format!("the lower limit ({lower}) must be below the upper one ({upper})"),
                            "write the lower limit first, e.g. `charge = [40, 80]`",
                        );
                    }
                }
            }
        }
    }
    if let Some(d) = t.get("interval").and_then(|f| f.positive_duration(p)) {
        care.interval = d;
    }
    care
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i.value() as f64),
        Value::Float(f) => Some(*f.value()).filter(|x| x.is_finite()),
        _ => None,
    }
}
