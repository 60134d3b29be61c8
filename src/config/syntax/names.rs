//! Names of hosts, devices, builds and configs: they become folder names under
//! `artifacts/`, so they are restricted to a safe alphabet and must be unique.

use std::ops::Range;

use crate::config::syntax::problems::Problems;

/// `^[A-Za-z0-9][A-Za-z0-9_-]*$`: no `/`, no `..`, no leading `-` or `.`, nothing a shell
/// or a file system treats specially.
pub fn is_valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub(crate) const NAME_RULE: &str = "use only letters, digits, `-` and `_`, starting with a letter or digit (names become folder names under artifacts/)";

/// Checks a name's alphabet; reports and returns false when it is not allowed.
pub(crate) fn check_name(p: &mut Problems, span: Option<Range<usize>>, key: &str, what: &str, name: &str) -> bool {
    if is_valid_name(name) {
        return true;
    }
    p.push(span, key, format!("`{name}` is not a valid {what} name"), NAME_RULE);
    false
}

/// The names of one kind seen so far in a file, to report duplicates with both places.
pub(crate) struct NameSet {
    what: &'static str,
    seen: Vec<(String, Option<Range<usize>>)>,
}

impl NameSet {
    pub fn new(what: &'static str) -> Self {
        NameSet { what, seen: Vec::new() }
    }

    /// Adds a name; a name equal to an earlier one (also when only the case differs,
    /// since folders would collide on macOS and Windows) is reported.
    pub fn add(&mut self, p: &mut Problems, name: &str, span: Option<Range<usize>>, key: &str) {
        let what = self.what;
        if let Some((first, first_span)) = self.seen.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            let at = p.location(first_span);
            if first == name {
                p.push(
                    span,
                    key,
                    format!("duplicate {what} name `{name}` (first defined at {at})"),
                    format!("give every {what} its own name"),
                );
            } else {
                p.push(
                    span,
                    key,
                    format!("{what} names `{first}` (at {at}) and `{name}` differ only in case"),
                    "rename one: their artifact folders would collide on case-insensitive file systems",
                );
            }
            return;
        }
        self.seen.push((name.to_string(), span));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "sim-iphone-1", "A_b-9", "9lives"] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", "_a", ".", "..", "../x", "a/b", "a b", "a.b", "ä", "a\\b", "~"] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }
}
