//! Collects every problem found in one pass over a config file.

use std::ops::Range;

use crate::config::syntax::source::Source;
use crate::config::{ConfigError, Diagnostic};

pub(crate) struct Problems<'s> {
    pub source: &'s Source,
    list: Vec<Diagnostic>,
}

impl<'s> Problems<'s> {
    pub fn new(source: &'s Source) -> Self {
        Problems { source, list: Vec::new() }
    }

    /// Records a problem at `span` (or at the file as a whole when `None`).
    pub fn push(&mut self, span: Option<Range<usize>>, key: &str, message: impl Into<String>, fix: impl Into<String>) {
        let (line, column) = match span {
            Some(s) => {
                let (l, c) = self.source.position(s.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        self.list.push(Diagnostic {
            file: self.source.path.clone(),
            line,
            column,
            key: key.to_string(),
            message: message.into(),
            fix: fix.into(),
        });
    }

    /// `file:line:col` of a span, for messages that point at a second place.
    pub fn location(&self, span: &Option<Range<usize>>) -> String {
        match span {
            Some(s) => {
                let (l, c) = self.source.position(s.start);
                format!("{}:{l}:{c}", self.source.path.display())
            }
            None => self.source.path.display().to_string(),
        }
    }

    /// How many problems so far; comparing counts tells whether a part added any.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// `Ok(value)` when nothing was wrong, else every problem in file order
    /// (problems of the file as a whole first).
    pub fn finish<T>(self, value: T) -> Result<T, ConfigError> {
        if self.list.is_empty() {
            return Ok(value);
        }
        let mut diagnostics = self.list;
        diagnostics.sort_by_key(|d| (d.line.unwrap_or(0), d.column.unwrap_or(0)));
        Err(ConfigError { diagnostics })
    }
}
