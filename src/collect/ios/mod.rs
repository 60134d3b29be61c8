//! Parsers of what iPhones (battery registry, powerlog, sysdiagnose) give back.

pub mod battery;
pub mod powerlog;
pub mod product_types;
pub mod sysdiagnose;
