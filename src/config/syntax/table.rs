//! A view of one TOML table (or inline table) that reads typed values and reports
//! every problem with its place, instead of stopping at the first.

use std::ops::Range;
use std::time::Duration;

use toml_edit::{Document, Item, TableLike, Value};

use crate::config::syntax::duration::{parse_duration, parse_percent};
use crate::config::syntax::problems::Problems;
use crate::config::syntax::suggest::{closest, fix_for_unknown};

/// A table in the document, with its dotted path and where it is written.
pub(crate) struct Table<'a> {
    inner: &'a dyn TableLike,
    path: String,
    span: Option<Range<usize>>,
}

/// One value in a table: the item plus its key, dotted path and place.
pub(crate) struct Field<'a> {
    pub item: &'a Item,
    pub leaf: String,
    pub path: String,
    key_span: Option<Range<usize>>,
}

/// `path.key`, quoting the key the way TOML would when it is not a bare key.
pub(crate) fn join(path: &str, key: &str) -> String {
    let bare = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let key = if bare { key.to_string() } else { format!("{key:?}") };
    if path.is_empty() { key } else { format!("{path}.{key}") }
}

impl<'a> Table<'a> {
    pub fn root(doc: &'a Document<String>) -> Self {
        Table { inner: doc.as_table(), path: String::new(), span: None }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Where the table is written (its `[header]`, `{ ... }`, or its key).
    pub fn span(&self) -> Option<Range<usize>> {
        self.span.clone()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Reports every key that is not in `known`, with a suggestion.
    pub fn check_keys(&self, p: &mut Problems, known: &[&str]) {
        self.check_keys_except(p, known, &[]);
    }

    /// Like `check_keys`, but leaves the keys in `reported` to the caller, which has a
    /// better message for them (a removed key, another platform's key); they are never
    /// suggested for a typo.
    pub fn check_keys_except(&self, p: &mut Problems, known: &[&str], reported: &[&str]) {
        for f in self.fields() {
            if !known.contains(&f.leaf.as_str()) && !reported.contains(&f.leaf.as_str()) {
                p.push(
                    f.key_span.clone().or_else(|| f.span()),
                    &f.path,
                    format!("unknown key `{}`", f.leaf),
                    fix_for_unknown(&f.leaf, known, "keys"),
                );
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<Field<'a>> {
        let (k, item) = self.inner.get_key_value(key)?;
        Some(Field { item, leaf: key.to_string(), path: join(&self.path, key), key_span: k.span() })
    }

    /// Like `get`, but a missing key is a problem; `example` shows how to write it.
    pub fn required(&self, p: &mut Problems, key: &str, example: &str) -> Option<Field<'a>> {
        let f = self.get(key);
        if f.is_none() {
            let here = if self.path.is_empty() {
                "at the top of the file".to_string()
            } else {
                format!("under [{}]", self.path)
            };
            p.push(
                self.span(),
                &join(&self.path, key),
                format!("missing required key `{key}`"),
                format!("add `{example}` {here}"),
            );
        }
        f
    }

    /// Every entry, in file order.
    pub fn fields(&self) -> Vec<Field<'a>> {
        self.inner.iter().filter_map(|(k, _)| self.get(k)).collect()
    }
}

impl<'a> Field<'a> {
    /// Where the value is written, else where its key is.
    pub fn span(&self) -> Option<Range<usize>> {
        self.item.span().or_else(|| self.key_span.clone())
    }

    /// Reports a problem with this value.
    pub fn problem(&self, p: &mut Problems, message: impl Into<String>, fix: impl Into<String>) {
        p.push(self.span(), &self.path, message, fix);
    }

    /// Reports a problem with the key itself (a key that must not be there).
    pub fn key_problem(&self, p: &mut Problems, message: impl Into<String>, fix: impl Into<String>) {
        p.push(self.key_span.clone().or_else(|| self.span()), &self.path, message, fix);
    }

    /// "string \"five\"", "integer 5", "table" ...: what was found, for type errors.
    fn found(&self, p: &Problems) -> String {
        let kind = match self.item {
            Item::Value(Value::InlineTable(_)) | Item::Table(_) => "a table",
            Item::ArrayOfTables(_) => "an array of tables",
            Item::Value(Value::Array(_)) => "an array",
            Item::Value(Value::String(_)) => "the string",
            Item::Value(Value::Integer(_)) => "the integer",
            Item::Value(Value::Float(_)) => "the number",
            Item::Value(Value::Boolean(_)) => "the boolean",
            Item::Value(Value::Datetime(_)) => "the date",
            Item::None => "nothing",
        };
        let scalar = matches!(
            self.item,
            Item::Value(
                Value::String(_) | Value::Integer(_) | Value::Float(_) | Value::Boolean(_) | Value::Datetime(_)
            )
        );
        match (scalar, self.item.span()) {
            (true, Some(s)) => {
                let text = p.source.snippet(&s);
                let text: String = if text.chars().count() > 40 {
                    text.chars().take(37).chain("...".chars()).collect()
                } else {
                    text.to_string()
                };
                format!("{kind} {text}")
            }
            _ => kind.to_string(),
        }
    }

    pub fn wrong_type(&self, p: &mut Problems, expected: &str, fix: impl Into<String>) {
        let found = self.found(p);
        self.problem(p, format!("expected {expected}, found {found}"), fix);
    }

    pub fn str(&self, p: &mut Problems) -> Option<&'a str> {
        match self.item.as_str() {
            Some(s) => Some(s),
            None => {
                self.wrong_type(p, "a string", format!("quote the value: `{} = \"...\"`", self.leaf));
                None
            }
        }
    }

    /// A string with something in it.
    pub fn text(&self, p: &mut Problems) -> Option<String> {
        let s = self.str(p)?;
        if s.trim().is_empty() {
            self.problem(p, "must not be empty", format!("write a value: `{} = \"...\"`", self.leaf));
            return None;
        }
        Some(s.to_string())
    }

    pub fn bool(&self, p: &mut Problems) -> Option<bool> {
        match self.item.as_bool() {
            Some(b) => Some(b),
            None => {
                self.wrong_type(
                    p,
                    "true or false",
                    format!("write `{0} = true` or `{0} = false` (no quotes)", self.leaf),
                );
                None
            }
        }
    }

    /// An integer or a float, finite.
    pub fn number(&self, p: &mut Problems) -> Option<f64> {
        let v = match self.item {
            Item::Value(Value::Integer(i)) => *i.value() as f64,
            Item::Value(Value::Float(f)) => *f.value(),
            _ => {
                self.wrong_type(p, "a number", format!("write a number without quotes, e.g. `{} = 10`", self.leaf));
                return None;
            }
        };
        if !v.is_finite() {
            self.problem(p, format!("must be a finite number, got {v}"), "write an ordinary number");
            return None;
        }
        Some(v)
    }

    /// A number satisfying `ok`; `rule` says what is allowed ("between 0 and 100").
    pub fn number_where(&self, p: &mut Problems, ok: impl Fn(f64) -> bool, rule: &str) -> Option<f64> {
        let v = self.number(p)?;
        if !ok(v) {
            self.problem(p, format!("must be {rule}, got {v}"), format!("write a number {rule}"));
            return None;
        }
        Some(v)
    }

    pub fn integer(&self, p: &mut Problems) -> Option<i64> {
        match self.item {
            Item::Value(Value::Integer(i)) => Some(*i.value()),
            _ => {
                self.wrong_type(
                    p,
                    "a whole number",
                    format!("write a whole number without quotes, e.g. `{} = 3`", self.leaf),
                );
                None
            }
        }
    }

    /// A whole number in `min..=max`.
    pub fn integer_in(&self, p: &mut Problems, min: i64, max: i64) -> Option<i64> {
        let v = self.integer(p)?;
        if v < min {
            self.problem(p, format!("must be ≥ {min}, got {v}"), format!("write a whole number ≥ {min}"));
            return None;
        }
        if v > max {
            self.problem(p, format!("must be ≤ {max}, got {v}"), format!("write a whole number ≤ {max}"));
            return None;
        }
        Some(v)
    }

    pub fn u32_at_least(&self, p: &mut Problems, min: u32) -> Option<u32> {
        self.integer_in(p, i64::from(min), i64::from(u32::MAX)).map(|v| v as u32)
    }

    pub fn duration(&self, p: &mut Problems) -> Option<Duration> {
        let fix = format!("write a duration string such as `{} = \"10m\"` (units: ms, s, m, h, d)", self.leaf);
        match self.item {
            Item::Value(Value::String(s)) => match parse_duration(s.value()) {
                Ok(d) => Some(d),
                Err(e) => {
                    self.problem(p, format!("invalid duration: {e}"), fix);
                    None
                }
            },
            Item::Value(Value::Integer(i)) => {
                let n = i.value();
                self.wrong_type(
                    p,
                    "a duration string",
                    format!("add a unit and quotes, e.g. `{} = \"{n}s\"`", self.leaf),
                );
                None
            }
            _ => {
                self.wrong_type(p, "a duration string", fix);
                None
            }
        }
    }

    /// A duration greater than zero.
    pub fn positive_duration(&self, p: &mut Problems) -> Option<Duration> {
        let d = self.duration(p)?;
        if d.is_zero() {
            self.problem(
                p,
                "must be longer than zero",
                format!("write a positive duration, e.g. `{} = \"10m\"`", self.leaf),
            );
            return None;
        }
        Some(d)
    }

    /// A fraction: a TOML number (`0.05`) or a percentage string (`"5%"`).
    pub fn fraction(&self, p: &mut Problems) -> Option<f64> {
        let fix = format!("write a percentage such as `{0} = \"5%\"` or a fraction such as `{0} = 0.05`", self.leaf);
        match self.item {
            Item::Value(Value::String(s)) => match parse_percent(s.value()) {
                Ok(v) => Some(v),
                Err(e) => {
                    self.problem(p, format!("invalid percentage: {e}"), fix);
                    None
                }
            },
            Item::Value(Value::Integer(_) | Value::Float(_)) => self.number(p),
            _ => {
                self.wrong_type(p, "a percentage or a fraction", fix);
                None
            }
        }
    }

    /// A fraction within `lo..=hi` (or strictly inside when `open`).
    pub fn fraction_in(&self, p: &mut Problems, lo: f64, hi: f64, open: bool) -> Option<f64> {
        let v = self.fraction(p)?;
        let ok = if open { v > lo && v < hi } else { v >= lo && v <= hi };
        if !ok {
            let written = self.item.span().map(|s| p.source.snippet(&s).to_string()).unwrap_or_else(|| v.to_string());
            let rule = if open {
                format!("greater than {lo} and less than {hi}")
            } else {
                format!("between {lo} and {hi} ({}% to {}%)", lo * 100.0, hi * 100.0)
            };
            self.problem(
                p,
                format!("must be {rule}, got {written}"),
                format!("write a fraction such as `{0} = 0.05` or a percentage such as `{0} = \"5%\"`", self.leaf),
            );
            return None;
        }
        Some(v)
    }

    pub fn table(&self, p: &mut Problems) -> Option<Table<'a>> {
        match self.item.as_table_like() {
            Some(inner) => Some(Table { inner, path: self.path.clone(), span: self.span() }),
            None => {
                self.wrong_type(p, "a table", format!("write it as a table: `[{}]` followed by its keys", self.path));
                None
            }
        }
    }

    /// `[[name]]` tables, or an array of inline tables.
    pub fn tables(&self, p: &mut Problems) -> Option<Vec<Table<'a>>> {
        let path = |i: usize| format!("{}[{i}]", self.path);
        match self.item {
            Item::ArrayOfTables(a) => Some(
                a.iter()
                    .enumerate()
                    .map(|(i, t)| Table { inner: t as &dyn TableLike, path: path(i), span: t.span() })
                    .collect(),
            ),
            Item::Value(Value::Array(a)) => {
                let mut out = Vec::new();
                for (i, v) in a.iter().enumerate() {
                    match v.as_inline_table() {
                        Some(t) => out.push(Table { inner: t as &dyn TableLike, path: path(i), span: t.span() }),
                        None => p.push(
                            v.span(),
                            &path(i),
                            format!("expected a table, found {}", v.type_name()),
                            "write `{ key = value, ... }`",
                        ),
                    }
                }
                Some(out)
            }
            _ => {
                self.wrong_type(
                    p,
                    "an array of tables",
                    format!("write each entry as a `[[{}]]` table (double brackets)", self.path),
                );
                None
            }
        }
    }

    /// An array of strings; elements that are not strings are reported and skipped.
    /// Each string comes with its place, for later checks.
    pub fn strings(&self, p: &mut Problems) -> Option<Vec<(String, Option<Range<usize>>)>> {
        let Some(a) = self.item.as_array() else {
            let fix = match self.item.as_str() {
                Some(s) => format!("put it in brackets: `{} = [{:?}]`", self.leaf, s),
                None => format!("write a list of strings: `{} = [\"a\", \"b\"]`", self.leaf),
            };
            self.wrong_type(p, "an array of strings", fix);
            return None;
        };
        let mut out = Vec::new();
        for (i, v) in a.iter().enumerate() {
            match v.as_str() {
                Some(s) => out.push((s.to_string(), v.span())),
                None => p.push(
                    v.span(),
                    &format!("{}[{i}]", self.path),
                    format!("expected a string, found {}", v.type_name()),
                    "quote every element of the list",
                ),
            }
        }
        Some(out)
    }

    /// A string that must be one of `options`.
    pub fn one_of(&self, p: &mut Problems, options: &[&'static str]) -> Option<&'static str> {
        let s = self.str(p)?;
        if let Some(o) = options.iter().find(|o| **o == s) {
            return Some(o);
        }
        let fix = match closest(s, options) {
            Some(c) => format!("did you mean \"{c}\"?"),
            None => {
                let quoted: Vec<String> = options.iter().map(|o| format!("\"{o}\"")).collect();
                format!("use one of {}", quoted.join(", "))
            }
        };
        self.problem(p, format!("unknown value \"{s}\""), fix);
        None
    }
}
