//! The SQLite store: campaigns, planned trials, attempts, measurements.

mod records;

pub use records::*;
