//! Power monitors: instruments that supply a device in place of its battery and sample its
//! current (docs/platforms/monitors.md). One folder per kind; what their samples give is
//! computed in `collect::monitor`.

pub mod monsoon;
pub mod otii;
