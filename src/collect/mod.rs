//! Parsers of device outputs: pure functions of text and bytes.

pub mod procfs;
pub mod sim_dump;
