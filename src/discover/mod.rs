//! `lab discover` and `lab init` ([first-phone.md](../../docs/first-phone.md)): what is
//! attached to each host of the lab, whether the lab file has it, what keeps it from being
//! used, and lab-file blocks for what is new. Read-only: nothing is written on a phone and
//! no hub port is switched.

mod finding;
mod in_lab;
mod lan;
mod look_error;
mod options;
mod scan;
mod toml_out;

pub use finding::{FoundMonitor, FoundPhone, HostFindings, HubPlace, PhoneState};
pub use in_lab::mark_in_lab;
pub use lan::lan_address;
pub use options::DiscoverOptions;
pub use scan::{discover, discover_host};
pub use toml_out::{Reached, device_blocks, endpoint_lines, endpoint_url, has_phones, names_in, new_lab};
