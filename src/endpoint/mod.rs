//! The traffic endpoint: counts what the app under test really sent, per trial.

mod counts;
mod server;

pub use counts::{TokenCounts, TrafficCount, token_of};
pub use server::{Endpoint, EndpointError};
