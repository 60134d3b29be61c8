//! Parsers of what the simulated phone give back.

pub mod dump;
