//! The SQLite store: campaigns, planned trials, attempts, measurements.

mod operator_steps;
mod records;
mod schedule_slots;
mod schema;
mod sqlite;

pub use records::*;
pub use schedule_slots::{Claim, Claimant, SlotRow, SlotState};
pub use schema::MIGRATIONS;
pub use sqlite::{Store, StoreError, pid_alive};
