//! Parsers of what USB hubs (`uhubctl`) give back.

pub mod uhubctl;
