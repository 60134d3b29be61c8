//! Verdicts as JUnit XML (a campaign's report and `lab compare`) for CI systems.

pub(super) mod compare;
pub(super) mod report;
pub(super) mod xml;
