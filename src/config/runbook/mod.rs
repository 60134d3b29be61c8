//! Runbooks: their types ([`model`], [`steps`]), device selectors, and the `read_*` functions
//! that read each section into them.

pub(super) mod model;
pub(super) mod read_builds;
pub(super) mod read_configs;
pub(super) mod read_launch;
pub(super) mod read_runbook;
pub(super) mod read_sections;
pub(super) mod read_steps;
pub(super) mod selector;
pub(super) mod steps;
