//! What a power monitor's samples give: a trace of current (and voltage) at a fixed rate
//! with the gaps the instrument reported, and the soak window's energy figures from it.

mod npy;
mod power_trace;
mod window;

pub use npy::npy_f32;
pub use power_trace::{Gap, PowerTrace, Voltage};
pub use window::{GapLimits, WindowFigures};
