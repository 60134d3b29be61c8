//! `lab`: a reproducible device-lab orchestrator.
//!
//! The library never prints; the runner emits events and only the CLI reporter
//! writes to the terminal.

pub mod care;
pub mod cli;
pub mod clock;
pub mod collect;
pub mod config;
pub mod device;
pub mod discover;
pub mod endpoint;
pub mod fs;
pub mod import;
pub mod measure;
pub mod monitor;
pub mod notify;
pub mod plan;
pub mod report;
pub mod runner;
pub mod schedule;
pub mod seed;
pub mod stats;
pub mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tether;
pub mod text;
pub mod transport;
