//! Parsers of what Linux (`/proc`, `/sys/class/power_supply`) give back.

pub mod power_supply;
pub mod proc_stat;
pub mod procfs;
