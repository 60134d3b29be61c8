//! The lab's status view, shared by `lab status` (table, JSON, `--watch`) and `lab serve`'s pages.

mod agents;
mod batteries;
mod operator_steps;
mod queues;
mod view;

pub use agents::AgentLine;
pub use batteries::{BatteryLine, BatteryView};
pub use operator_steps::{AttestedLine, WaitingStep};
pub use queues::QueueLine;
pub use view::{CampaignLine, DeviceLine, HostLine, StatusView, collect, render};
