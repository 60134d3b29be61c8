//! The runner: campaigns, per-device workers, the trial state machine, events.

mod adaptive;
mod agent;
mod campaign;
mod desk;
mod event;
mod follow;
mod footprint;
mod launch;
mod look;
mod manifest;
mod monitored;
mod recorder;
mod slices;
mod start_gate;
mod state_row;
mod status_board;
mod submit;
mod trial;
#[cfg(test)]
mod trial_tests;
mod turns;
mod uploads;
mod validity;
mod worker;

pub use adaptive::{Extension, Imprecise, imprecise};
pub use agent::{AgentError, serve as serve_agent};
pub use campaign::*;
pub use desk::{OperatorDesk, StepAsk, StepError};
pub use event::*;
pub use follow::{Followed, follow};
pub use footprint::{Footprint, TARGET_CPU_PCT, TARGET_WAKEUPS_PER_S};
pub use launch::{AgentPart, Ending, LaunchError, LaunchFailure, Launched, Queueing, Start, launch, plan_with_noise};
pub use manifest::{
    MANIFEST_FILE, MANIFEST_VERSION, Manifest, ManifestDevice, ManifestError, ManifestRunbook, ManifestVariant, RerunOf,
};
pub use monitored::{MonitorPlace, SOURCE as MONITOR_SOURCE, UsbOpener, monitor_place};
pub use slices::{SHORT_SLICE_NS, ask_short_slice, kernel_keeps_slices};
pub use status_board::StatusBoard;
pub use submit::{Submitted, planned_hosts, submit, submit_planned};
pub use trial::{AttemptOutcome, RunError, TrialContext, now_rfc3339, traffic_token};
pub use turns::{StartWhen, Turn, Turns, WaitingTurn, join as join_turn};
pub use uploads::{Uploads, start_for as start_uploads};
pub use validity::{precondition_violations, soak_violations};
pub use worker::WorkerEnd;
