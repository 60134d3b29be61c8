//! How durations and p-values are written for people. Each output keeps the style it has
//! always had (tables, reports, errors and events are snapshotted), so there is one
//! function per style, all in one place, instead of one private formatter per module.

pub mod duration;
pub mod p_value;
