//! The simulated phone (being implemented).
