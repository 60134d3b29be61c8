//! Parsers of what iPhones (battery registry, powerlog, sysdiagnose) give back.

pub mod battery;
pub mod powerlog;
pub mod sysdiagnose;
