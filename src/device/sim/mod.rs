//! The simulated phone (being implemented).
pub struct SimDevice; impl SimDevice { pub fn new(_s: crate::config::DeviceSpec) -> Self { todo!() } }
