//! A config file's text, parsed with spans, and byte offsets turned into line:column.

use std::ops::Range;
use std::path::{Path, PathBuf};

use toml_edit::Document;

use crate::config::{ConfigError, Diagnostic};

/// The text of one config file and where its lines start.
pub(crate) struct Source {
    pub path: PathBuf,
    pub text: String,
    /// Byte offset of the first character of every line.
    line_starts: Vec<usize>,
}

impl Source {
    pub fn new(path: &Path, text: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Source { path: path.to_path_buf(), text: text.to_string(), line_starts }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset).max(1);
        let start = self.line_starts[line - 1];
        let column = self.text.get(start..offset).map_or(1, |s| s.chars().count() + 1);
        (line, column)
    }

    /// The text under a span, if it is one.
    pub fn snippet(&self, span: &Range<usize>) -> &str {
        self.text.get(span.clone()).unwrap_or("")
    }

    /// Parses the text as TOML, keeping spans. A syntax error becomes one diagnostic.
    pub fn parse(&self) -> Result<Document<String>, ConfigError> {
        Document::parse(self.text.clone()).map_err(|e| {
            let span = e.span();
            let (line, column) = match &span {
                Some(s) => {
                    let (l, c) = self.position(s.start);
                    (Some(l), Some(c))
                }
                None => (None, None),
            };
            let raw = e.message().trim_end_matches('\n');
            let (message, fix) = describe_syntax_error(raw, span.as_ref().map(|s| self.snippet(s)));
            let file = self.path.clone();
            let d = Diagnostic { file, line, column, key: String::new(), message, fix };
            ConfigError { diagnostics: vec![d] }
        })
    }
}

/// Turns toml_edit's terse parse messages into a message and a fix.
fn describe_syntax_error(raw: &str, snippet: Option<&str>) -> (String, String) {
    let raw = raw.lines().next().unwrap_or(raw).trim();
    if raw == "duplicate key" {
        let name = snippet.unwrap_or("").trim();
        let message = if name.is_empty() {
            "invalid TOML: duplicate key".to_string()
        } else {
            format!("invalid TOML: duplicate key `{name}`")
        };
        return (message, "define every key and table only once".into());
    }
    (
        format!("invalid TOML: {raw}"),
        "fix the syntax (strings need quotes, tables are written [name], lists [a, b]; see docs/config.md)".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let s = Source::new(Path::new("f.toml"), "ab\n°c = 1\n\nx");
        assert_eq!(s.position(0), (1, 1));
        assert_eq!(s.position(1), (1, 2));
        assert_eq!(s.position(3), (2, 1));
        // '°' is two bytes but one column.
        assert_eq!(s.position(5), (2, 2));
        assert_eq!(s.position(11), (3, 1));
        assert_eq!(s.position(12), (4, 1));
        assert_eq!(s.position(13), (4, 2));
        assert_eq!(s.position(999), (4, 2));
    }

    #[test]
    fn syntax_error_has_a_place() {
        let s = Source::new(Path::new("f.toml"), "a = 1\nb = \n");
        let d = s.parse().unwrap_err().diagnostics.remove(0);
        assert_eq!(d.line, Some(2));
        assert!(d.message.starts_with("invalid TOML"), "{}", d.message);
    }

    #[test]
    fn duplicate_key_is_named() {
        let s = Source::new(Path::new("f.toml"), "abc = 1\nabc = 2\n");
        let d = s.parse().unwrap_err().diagnostics.remove(0);
        assert_eq!((d.line, d.column), (Some(2), Some(1)));
        assert_eq!(d.message, "invalid TOML: duplicate key `abc`");
    }
}
