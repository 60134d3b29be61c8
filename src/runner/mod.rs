//! The runner: campaigns, per-device workers, the trial state machine, events.

mod adaptive;
mod campaign;
mod event;
mod trial;
mod validate;
mod worker;

pub use adaptive::{Extension, Imprecise, imprecise};
pub use campaign::*;
pub use event::*;
pub use trial::{AttemptOutcome, RunError, TrialContext, now_rfc3339};
pub use validate::{precondition_violations, soak_violations};
pub use worker::WorkerEnd;
