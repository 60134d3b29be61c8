//! `lab.toml`: its types ([`model`]) and the `read_*` functions that read each section into them.

pub(super) mod model;
pub(super) mod read_artifacts;
pub(super) mod read_care;
pub(super) mod read_device;
pub(super) mod read_endpoint;
pub(super) mod read_host;
pub(super) mod read_lab;
pub(super) mod read_monitor;
pub(super) mod read_platform;
pub(super) mod read_serve;
pub(super) mod read_sim;
pub(super) mod store_location_error;
