//! Values that go into and come out of either backend's SQL, so a store operation is
//! written once: SQLite's five storage classes, which PostgreSQL's columns map onto
//! (`BIGINT`, `DOUBLE PRECISION`, `TEXT`, `BYTEA`; docs/shared-lab.md).

use super::conn::DbError;

/// One SQL value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::Int(i64::from(v))
            }
        }
    )*};
}
from_int!(i32, u32, i64, bool, u8, u16, i16);

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Real(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(v)
    }
}

impl From<&String> for Value {
    fn from(v: &String) -> Value {
        Value::Text(v.clone())
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Value {
        Value::Blob(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// `vals![a, b, …]`: the parameters of a statement, each converted to a [`Value`].
macro_rules! vals {
    ($($v:expr),* $(,)?) => {
        [$($crate::store::Value::from($v)),*]
    };
}
pub(crate) use vals;

/// A row, read whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<Value>);

impl Row {
    /// Column `i` as `T`.
    pub fn get<T: FromValue>(&self, i: usize) -> Result<T, DbError> {
        let v = self.0.get(i).ok_or_else(|| DbError::Type(format!("no column {i} in a row of {}", self.0.len())))?;
        T::from_value(v).map_err(|want| DbError::Type(format!("column {i}: {v:?} is not {want}")))
    }

    /// Column `i`'s text, borrowed; `None` for NULL.
    pub fn text(&self, i: usize) -> Result<Option<&str>, DbError> {
        match self.0.get(i) {
            Some(Value::Text(s)) => Ok(Some(s)),
            Some(Value::Null) => Ok(None),
            v => Err(DbError::Type(format!("column {i}: {v:?} is not text"))),
        }
    }

    /// Column `i`'s bytes, borrowed; `None` for anything but a blob.
    pub fn blob(&self, i: usize) -> Option<&[u8]> {
        match self.0.get(i) {
            Some(Value::Blob(b)) => Some(b),
            _ => None,
        }
    }
}

/// A Rust type a column's value converts to; `Err` names the type wanted.
pub trait FromValue: Sized {
    fn from_value(v: &Value) -> Result<Self, &'static str>;
}

impl FromValue for i64 {
    fn from_value(v: &Value) -> Result<i64, &'static str> {
        match v {
            Value::Int(i) => Ok(*i),
            _ => Err("an integer"),
        }
    }
}

macro_rules! from_value_int {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(v: &Value) -> Result<$t, &'static str> {
                match v {
                    Value::Int(i) => <$t>::try_from(*i).map_err(|_| concat!("a ", stringify!($t))),
                    _ => Err(concat!("a ", stringify!($t))),
                }
            }
        }
    )*};
}
from_value_int!(i32, u32, u16, u8);

impl FromValue for bool {
    fn from_value(v: &Value) -> Result<bool, &'static str> {
        match v {
            Value::Int(i) => Ok(*i != 0),
            _ => Err("a boolean (an integer)"),
        }
    }
}

impl FromValue for f64 {
    fn from_value(v: &Value) -> Result<f64, &'static str> {
        match v {
            Value::Real(f) => Ok(*f),
            // SQLite hands back a whole REAL stored from an integer expression as one.
            Value::Int(i) => Ok(*i as f64),
            _ => Err("a number"),
        }
    }
}

impl FromValue for String {
    fn from_value(v: &Value) -> Result<String, &'static str> {
        match v {
            Value::Text(s) => Ok(s.clone()),
            _ => Err("text"),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(v: &Value) -> Result<Vec<u8>, &'static str> {
        match v {
            Value::Blob(b) => Ok(b.clone()),
            _ => Err("bytes"),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> Result<Option<T>, &'static str> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}
