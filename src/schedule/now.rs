//! The wall clock schedules are decided by.

use chrono::{DateTime, Utc};

/// The system's wall clock, or a pinned instant (tests, through `LAB_NOW`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Now {
    System,
    Pinned(DateTime<Utc>),
}

impl Now {
    pub fn get(self) -> DateTime<Utc> {
        match self {
            Now::System => Utc::now(),
            Now::Pinned(t) => t,
        }
    }
}
