//! The SQLite store: campaigns, planned trials, attempts, measurements.

mod operator_steps;
mod records;
mod schema;
mod sqlite;

pub use records::*;
pub use schema::MIGRATIONS;
pub use sqlite::{Store, StoreError, pid_alive};
