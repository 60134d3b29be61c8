//! Parsers of device outputs: pure functions of text and bytes that return typed values
//! with units and never panic; every problem is a [`ParseError`] naming the line.
//!
//! One folder per source: [`android`], [`ios`], [`linux`] (hosts and Android's kernel
//! files), [`hubs`] (uhubctl) and [`sim`] (the simulated phone). [`metrics_map`] turns
//! parsed values into the lab's measurements.

pub mod android;
pub mod hubs;
pub mod ios;
pub mod linux;
pub mod metrics_map;
pub mod monitor;
mod parse_error;
pub mod sim;
mod text;

pub use parse_error::ParseError;
