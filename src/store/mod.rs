//! The SQLite store: campaigns, planned trials, attempts, measurements.

mod alerts;
mod backend;
mod batch;
mod columns;
mod columns_reader;
mod copy;
mod encoded_attempt;
mod findings;
mod lease;
mod look_values;
mod measurement_columns;
mod operator_steps;
mod pg_record;
mod port_cuts;
mod process_id;
mod queue;
mod records;
mod schedule_slots;
mod schema;
mod sqlite;
mod state_digest;
mod summaries;

pub use alerts::{AlertRow, AlertState};
pub use backend::{Conn, DbError, Dialect, FromValue, PgOwner, PgUrl, Row, Value};
pub use columns::{CampaignColumns, Names, Points, Sym};
pub use copy::{CopyProgress, CopySummary};
pub use encoded_attempt::{EncodedAttempt, SeriesRow, list_json};
pub use findings::{FindingRow, FindingState};
pub use lease::{DeviceLease, LeaseHolder, LeaseRequest, this_host, who};
pub use look_values::LookAttempt;
pub use port_cuts::PortCut;
pub use process_id::ProcessId;
pub use queue::{Busy, QueueTicket, Waiter};
pub use records::*;
pub use schedule_slots::{Claim, Claimant, SlotRow, SlotState};
pub use schema::MIGRATIONS;
#[cfg(test)]
pub(crate) use schema::open_at_version;
#[cfg(test)]
pub(crate) use sqlite::plan_head;
#[cfg(test)]
pub(crate) use sqlite::tests::{attempt as test_attempt, campaign as test_campaign};
pub use sqlite::{Store, StoreError};
pub use state_digest::{Kept, MOMENTS, OPERATOR, Reading, SETTINGS, SOURCES, StateDigest};
#[cfg(test)]
pub(crate) use summaries::tests::row as summary_row_fixture;
pub use summaries::{HistoryRow, SummaryRow};
