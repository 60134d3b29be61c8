//! Device selectors in a runbook: `name-or-glob`, `tag:X`, `model:X`.

use std::fmt;

use crate::config::syntax::value_error::ValueError;
use crate::config::{DeviceSpec, Selector};

impl Selector {
    /// Parses a selector as written in `devices = [...]`.
    pub fn parse(s: &str) -> Result<Selector, ValueError> {
        let text = s.trim();
        if text.is_empty() {
            return Err(ValueError::EmptySelector);
        }
        let value = |rest: &str, kind: &'static str| {
            let v = rest.trim();
            if v.is_empty() {
                Err(ValueError::SelectorNamesNothing { text: text.into(), kind })
            } else {
                Ok(v.to_string())
            }
        };
        if let Some(rest) = text.strip_prefix("tag:") {
            return value(rest, "tag").map(Selector::Tag);
        }
        if let Some(rest) = text.strip_prefix("model:") {
            return value(rest, "model").map(Selector::Model);
        }
        if let Some((kind, _)) = text.split_once(':') {
            return Err(ValueError::UnknownSelectorKind { kind: kind.into(), text: text.into() });
        }
        globset::Glob::new(text).map_err(|e| ValueError::BadGlob { text: text.into(), why: e.kind().clone() })?;
        Ok(Selector::Name(text.to_string()))
    }

    /// Whether this selector picks `device`. Names are globs (`sim-*`); tags and
    /// models must match exactly.
    pub fn matches(&self, device: &DeviceSpec) -> bool {
        match self {
            Selector::Name(pat) => match globset::Glob::new(pat) {
                Ok(g) => g.compile_matcher().is_match(&device.name),
                Err(_) => pat == &device.name,
            },
            Selector::Tag(t) => device.tags.iter().any(|x| x == t),
            Selector::Model(m) => &device.model == m,
        }
    }
}

/// As written in a runbook.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Name(n) => f.write_str(n),
            Selector::Tag(t) => write!(f, "tag:{t}"),
            Selector::Model(m) => write!(f, "model:{m}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DeviceKind, Platform, SimParams, TetherSpec};

    fn dev(name: &str, model: &str, tags: &[&str]) -> DeviceSpec {
        DeviceSpec {
            name: name.into(),
            host: "local".into(),
            model: model.into(),
            os: String::new(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            tether: TetherSpec::Software,
            kind: DeviceKind::Sim(SimParams::defaults(Platform::Ios)),
        }
    }

    #[test]
    fn parse_and_display_round_trip() {
        assert_eq!(Selector::parse("tag:phone"), Ok(Selector::Tag("phone".into())));
        assert_eq!(Selector::parse("model:iPhone 6s"), Ok(Selector::Model("iPhone 6s".into())));
        assert_eq!(Selector::parse("sim-*"), Ok(Selector::Name("sim-*".into())));
        for s in ["tag:phone", "model:iPhone 6s", "sim-*"] {
            assert_eq!(Selector::parse(s).unwrap().to_string(), s);
        }
        assert!(Selector::parse("tag:").unwrap_err().to_string().contains("names no tag"));
        assert!(Selector::parse("kind:x").unwrap_err().to_string().contains("unknown selector kind `kind:`"));
        assert!(Selector::parse("sim-[").unwrap_err().to_string().contains("not a valid glob"));
        assert!(Selector::parse(" ").is_err());
    }

    #[test]
    fn matching() {
        let d = dev("sim-iphone-1", "iPhone 6s", &["ios", "phone"]);
        assert!(Selector::Name("sim-iphone-1".into()).matches(&d));
        assert!(Selector::Name("sim-*".into()).matches(&d));
        assert!(!Selector::Name("sim-pixel-*".into()).matches(&d));
        assert!(!Selector::Name("sim-iphone".into()).matches(&d));
        assert!(Selector::Tag("phone".into()).matches(&d));
        assert!(!Selector::Tag("pho".into()).matches(&d));
        assert!(Selector::Model("iPhone 6s".into()).matches(&d));
        assert!(!Selector::Model("iphone 6s".into()).matches(&d));
    }
}
