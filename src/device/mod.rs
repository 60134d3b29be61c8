//! Devices: the `Device` trait and its backends.

mod api;
pub mod sim;
mod state;

pub use api::*;
pub use state::*;
