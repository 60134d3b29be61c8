//! The reading machinery every config file shares: the TOML text with spans, typed tables that
//! collect every problem with its place, durations, names, file references and suggestions.

pub(super) mod address;
pub(super) mod diagnostics;
pub(super) mod duration;
pub(super) mod files;
pub(super) mod names;
pub(super) mod problems;
pub(super) mod source;
pub(super) mod suggest;
pub(super) mod table;
pub(super) mod value_error;
