//! Devices: the `Device` trait and its backends.

pub mod android;
mod api;
mod factory;
pub mod host;
pub mod ios;
pub mod sim;
mod state;

pub use api::*;
pub use factory::open;
pub use state::*;
