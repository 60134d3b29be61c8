//! `adb shell settings get <namespace> <key>`: one value, or `null` when unset.

use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::{excerpt, numbered};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", content = "value", rename_all = "lowercase")]
pub enum SettingValue {
    /// The key is not set (`null`).
    Null,
    Integer(i64),
    Float(f64),
    Text(String),
}

impl SettingValue {
    /// The value as a number, when it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            SettingValue::Integer(i) => Some(*i as f64),
            SettingValue::Float(x) => Some(*x),
            _ => None,
        }
    }
}

/// Parses the output of one `settings get`: exactly one non-empty line.
pub fn parse(text: &str) -> Result<SettingValue, ParseError> {
    let mut lines = numbered(text).filter(|(_, l)| !l.trim().is_empty());
    let (n, value) =
        lines.next().ok_or_else(|| ParseError::at(1, "empty output: `settings get` prints one value or `null`"))?;
    if let Some((m, extra)) = lines.next() {
        return Err(ParseError::at(
            m,
            format!("`settings get` prints one line; found more: `{}` (after line {n})", excerpt(extra.trim())),
        ));
    }
    let v = value.trim();
    Ok(if v == "null" {
        SettingValue::Null
    } else if let Ok(i) = v.parse::<i64>() {
        SettingValue::Integer(i)
    } else if let Some(x) = v.parse::<f64>().ok().filter(|x| x.is_finite()) {
        SettingValue::Float(x)
    } else {
        SettingValue::Text(v.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(parse("128\n").unwrap(), SettingValue::Integer(128));
        assert_eq!(parse("null\n").unwrap(), SettingValue::Null);
        assert_eq!(parse("0.5").unwrap().as_f64(), Some(0.5));
        assert_eq!(parse("wifi,cell\n").unwrap(), SettingValue::Text("wifi,cell".into()));
        assert_eq!(parse("").unwrap_err().line(), Some(1));
        assert_eq!(parse("1\n2\n").unwrap_err().line(), Some(2));
    }
}
