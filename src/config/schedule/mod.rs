//! `[[schedule]]` of `lab.toml`: its types and [`read_schedule`].

pub(super) mod model;
pub(super) mod read_schedule;
