//! `lab history`: every campaign of a runbook as points per variant × model × metric, with
//! change points and the schedule's findings; loaded from stored summaries, rendered as a
//! table, JSON and an HTML page.

pub(super) mod build_history;
pub(super) mod html;
pub(super) mod load;
pub(super) mod render;
