//! The SQLite store: campaigns, planned trials, attempts, measurements.

mod alerts;
mod attempts;
mod backend;
mod batch;
mod campaigns;
mod columns;
mod columns_reader;
mod copy;
mod devices;
mod encoded_attempt;
mod error;
mod findings;
mod lease;
mod location;
mod measurement_columns;
mod open_at;
mod operator_steps;
mod pg_record;
mod port_cuts;
mod process_id;
mod queue;
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
mod summaries;

pub use alerts::{AlertRow, AlertState};
pub use backend::{Conn, DbError, Dialect, FromValue, PasswordError, PgOwner, PgUrl, Row, Value};
#[cfg(test)]
pub(crate) use campaigns::plan_head;
pub use columns::{CampaignColumns, Names, Points, Sym};
pub use copy::{CopyProgress, CopySummary};
pub use encoded_attempt::{EncodedAttempt, SeriesRow, list_json};
pub use error::StoreError;
pub use findings::{FindingRow, FindingState};
pub use lease::{DeviceLease, LeaseHolder, LeaseRequest, this_host, who};
pub use location::Location;
pub use open_at::{OpenError, shown_location};
pub use port_cuts::PortCut;
pub use process_id::ProcessId;
pub use queue::{Busy, QueueTicket, Waiter};
pub use records::*;
pub use schedule_slots::{Claim, Claimant, SlotRow, SlotState};
pub use schema::MIGRATIONS;
#[cfg(test)]
pub(crate) use schema::open_at_version;
pub use state_digest::{Kept, MOMENTS, OPERATOR, Reading, SETTINGS, SOURCES, StateDigest};
pub use store::Store;
#[cfg(test)]
pub(crate) use store::tests::{attempt as test_attempt, campaign as test_campaign};
#[cfg(test)]
pub(crate) use summaries::tests::row as summary_row_fixture;
pub use summaries::{HistoryRow, SummaryRow};
