//! The store: campaigns, planned trials, attempts, measurements, and what a shared lab
//! keeps (leases, queues, schedule slots), on SQLite (a file, the default) or PostgreSQL.
//!
//! One [`Store`] (`store.rs`), its operations in the files of their subjects. They are
//! written once, against [`Conn`] (`backend/`), through `Store::db`. Three paths stay
//! SQLite-only, on rusqlite's own connection (`Store::lock`), each with its PostgreSQL
//! counterpart beside it (the `on_both!` tests run each test on both):
//!
//! - **Recording attempts** (`Store::record_rows` → `batch.rs` with `sqlite_record.rs`
//!   and `operator_steps::insert_attestations`): rusqlite's `Transaction` for the group
//!   commit's savepoints (an attempt that fails halfway is rolled back alone), cached
//!   prepared statements, and `last_insert_rowid` for the consecutive id ranges each
//!   `attempt_report` row holds. This is the serial path every device's attempt waits
//!   on. PostgreSQL: `pg_record.rs` (multi-row inserts, ids reserved from the sequence).
//! - **A report's columns** (`Store::read_columns_stamped` → `columns.rs`, with
//!   `measurement_columns.rs`): rusqlite's borrowed values (`ValueRef`) and measurements
//!   read by rowid ranges on extra connections at once, where a `Conn` row would copy
//!   each of a million values into a `Value`. PostgreSQL: `columns_reader.rs`
//!   (`COPY … (FORMAT binary)`).
//! - **Schema and migrations** (`schema.rs`, with `backend/sqlite_open.rs`'s pragmas):
//!   SQLite's DDL and `PRAGMA user_version`. PostgreSQL: `backend/pg_schema.rs`.
//!
//! Tests also reach SQLite through `Store::lock` to damage or inspect a file.

mod agents;
mod alerts;
mod attempts;
mod backend;
mod batch;
mod behind;
mod campaigns;
mod columns;
/// A store filled with a campaign's records, for tests outside the store.
#[cfg(test)]
pub(crate) use columns::tests::fill as fill_for_tests;
mod columns_reader;
mod copy;
mod devices;
mod encoded_attempt;
mod error;
mod findings;
mod handover;
mod lease;
mod location;
mod look_values;
mod measurement_columns;
mod named_series;
mod open_at;
mod operator_steps;
mod pg_record;
mod port_cuts;
mod process_id;
mod queue;
mod raw_files;
mod records;
mod schedule_slots;
mod schema;
mod sqlite_record;
mod state_digest;
#[expect(
    clippy::module_inception,
    reason = "the file is named for its one type, `Store`, as the store's other files are"
)]
mod store;
mod submitted;
mod summaries;
mod wake;

pub use agents::{Agent, AgentLock, AgentRow};
pub use alerts::{AlertRow, AlertState};
pub use backend::{
    Conn, DbError, Dialect, FromValue, LockError, PasswordError, PgOwner, PgUrl, RootCertsProblem, Row, TlsError, Value,
};
#[cfg(test)]
pub(crate) use campaigns::plan_head;
pub use columns::{CampaignColumns, Names, Points, Sym};
pub use copy::{CopyProgress, CopySummary};
pub use encoded_attempt::{EncodedAttempt, SeriesRow, list_json};
pub use error::StoreError;
pub use findings::{FindingRow, FindingState};
pub use handover::Deliver;
pub use lease::{DeviceLease, LeaseHolder, LeaseRequest, this_host, who};
pub use location::Location;
pub use look_values::LookAttempt;
pub use named_series::SeriesFold;
pub use open_at::{OpenError, shown_location};
pub use port_cuts::PortCut;
pub use process_id::ProcessId;
pub use queue::{Busy, QueueTicket, Waiter};
pub use raw_files::{
    Bucket, Chunks, MANIFEST, Place, RawFileRow, RawFiles, RawFilesError, files_under, hash_file, note_failure,
    rows_for, upload_confirmed,
};
pub use records::*;
pub use schedule_slots::{Claim, Claimant, SlotRow, SlotState};
pub use schema::MIGRATIONS;
#[cfg(test)]
pub(crate) use schema::open_at_version;
pub use state_digest::{Kept, MOMENTS, OPERATOR, Reading, SETTINGS, SOURCES, StateDigest};
pub use store::Store;
#[cfg(test)]
pub(crate) use store::tests::{attempt as test_attempt, campaign as test_campaign};
pub use submitted::{Cancelled, Claimable, InFlight, PLAN_FORMAT};
#[cfg(test)]
pub(crate) use summaries::tests::row as summary_row_fixture;
pub use summaries::{HistoryRow, SummaryRow};
pub use wake::{Channel, Wake, Wakes};
