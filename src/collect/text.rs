//! Small helpers shared by the line-oriented parsers: numbers with the line in the error,
//! and excerpts of bad input that are safe to print.

use std::str::FromStr;

use super::parse_error::ParseError;

/// At most 40 characters of `s`, escaped, for error messages.
pub fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(40).flat_map(char::escape_debug).collect();
    if s.chars().nth(40).is_some() {
        out.push('…');
    }
    out
}

/// Parses `value` as a `T`; the error names the line and what the value was for.
pub fn number<T: FromStr>(line: usize, what: &str, value: &str) -> Result<T, ParseError> {
    value
        .trim()
        .parse::<T>()
        .map_err(|_| ParseError::at(line, format!("{what}: `{}` is not a number", excerpt(value.trim()))))
}

/// A finite `f64` (NaN and infinities are refused: they would poison statistics).
pub fn finite(line: usize, what: &str, value: &str) -> Result<f64, ParseError> {
    let x: f64 = number(line, what, value)?;
    if x.is_finite() { Ok(x) } else { Err(ParseError::at(line, format!("{what}: `{}` is not finite", excerpt(value)))) }
}

/// `true`/`false` (also `yes`/`no`, `1`/`0`, any case).
pub fn boolean(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" | "on" => Some(true),
        "false" | "no" | "0" | "off" => Some(false),
        _ => None,
    }
}

/// Lines numbered from 1, with a trailing `\r` removed.
pub fn numbered(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)))
}

/// The number of lines, for "ends too early" errors that point one past the end.
pub fn end_line(text: &str) -> usize {
    text.lines().count() + 1
}
