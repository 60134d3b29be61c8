//! `lab compare`: two campaigns of one runbook compared, and its table, Markdown and JSON.

pub(super) mod build_compare;
pub(super) mod render;
