//! `FromRow`: a row type read from a query's row, written once beside the type instead
//! of a closure per query that reads columns by number (`r.get(7)?`).
//!
//! A row is read in its columns' order through [`Columns`]: each type keeps the list of
//! the columns it reads (a `COLUMNS` constant) next to its `from_row`, in the same order,
//! so adding or moving a column is one edit in one place. A struct literal's fields are
//! evaluated in the order they are written: `from_row` writes them in the columns' order.
//! (By position, not by name: a campaign's million measurements are read through it, and
//! a name looked up per value would cost more than the read.)

use super::conn::DbError;
use super::value::{FromValue, Row};

/// A type made from a query's columns, read in order; `'r` lets it borrow the row's text
/// (a report's million rows are read without a copy of each).
pub trait FromRow<'r>: Sized {
    fn from_row(c: &mut Columns<'r>) -> Result<Self, DbError>;
}

/// A row's columns, read one after another.
pub struct Columns<'r> {
    row: &'r Row,
    next: usize,
}

impl<'r> Columns<'r> {
    pub fn new(row: &'r Row) -> Columns<'r> {
        Columns { row, next: 0 }
    }

    /// The next column's index (error messages name it).
    fn take(&mut self) -> usize {
        self.next += 1;
        self.next - 1
    }

    /// The next column as `T`.
    pub fn get<T: FromValue>(&mut self) -> Result<T, DbError> {
        let i = self.take();
        self.row.get(i)
    }

    /// The next column's text, borrowed; `None` for NULL.
    pub fn text(&mut self) -> Result<Option<&'r str>, DbError> {
        let i = self.take();
        self.row.text(i)
    }

    /// The next column's bytes, borrowed; `None` for anything but a blob.
    pub fn blob(&mut self) -> Option<&'r [u8]> {
        let i = self.take();
        self.row.blob(i)
    }

    /// The next column's text as JSON; an error names the column.
    pub fn json<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, DbError> {
        let i = self.take();
        let text: String = self.row.get(i)?;
        serde_json::from_str(&text).map_err(|e| DbError::Type(format!("column {i}: {e}")))
    }

    /// The next column, NULL or text as JSON; an error names the column.
    pub fn json_opt<T: serde::de::DeserializeOwned>(&mut self) -> Result<Option<T>, DbError> {
        let i = self.take();
        let text: Option<String> = self.row.get(i)?;
        text.map(|t| serde_json::from_str(&t)).transpose().map_err(|e| DbError::Type(format!("column {i}: {e}")))
    }

    /// The next column's text, borrowed; NULL is an error naming the column.
    pub fn str(&mut self) -> Result<&'r str, DbError> {
        let i = self.take();
        self.row.text(i)?.ok_or_else(|| DbError::Type(format!("column {i} is NULL")))
    }

    /// The next columns as a `T`.
    pub fn read<T: FromRow<'r>>(&mut self) -> Result<T, DbError> {
        T::from_row(self)
    }
}

impl Row {
    /// The row as a `T`, from its first column on.
    pub fn read<'r, T: FromRow<'r>>(&'r self) -> Result<T, DbError> {
        T::from_row(&mut Columns::new(self))
    }
}

/// Every row as a `T`.
pub fn read_all<T: for<'r> FromRow<'r>>(rows: &[Row]) -> Result<Vec<T>, DbError> {
    rows.iter().map(Row::read).collect()
}

/// One column, as it is.
macro_rules! one_column {
    ($($t:ty),*) => {$(
        impl FromRow<'_> for $t {
            fn from_row(c: &mut Columns<'_>) -> Result<$t, DbError> {
                c.get()
            }
        }
    )*};
}
one_column!(i64, i32, u32, f64, bool, String, Vec<u8>);

impl<T: FromValue> FromRow<'_> for Option<T> {
    fn from_row(c: &mut Columns<'_>) -> Result<Option<T>, DbError> {
        c.get()
    }
}

/// Two row types, one after the other (a key and its row, …).
impl<'r, A: FromRow<'r>, B: FromRow<'r>> FromRow<'r> for (A, B) {
    fn from_row(c: &mut Columns<'r>) -> Result<(A, B), DbError> {
        Ok((c.read()?, c.read()?))
    }
}

/// Three, one after the other.
impl<'r, A: FromRow<'r>, B: FromRow<'r>, C: FromRow<'r>> FromRow<'r> for (A, B, C) {
    fn from_row(c: &mut Columns<'r>) -> Result<(A, B, C), DbError> {
        Ok((c.read()?, c.read()?, c.read()?))
    }
}
