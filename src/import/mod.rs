//! `lab import`: hand-captured device outputs parsed with `collect`'s parsers into the
//! lab's measurements ([`run`]), and attached as a trial of a campaign in the store
//! ([`attach`]) so hand-run experiments get the same report as `lab run` trials.

mod attach;
mod kind;
mod read;

pub use attach::{AttachError, AttachRequest, Attached, attach};
pub use kind::ImportKind;
pub use read::{ImportError, ImportOptions, Imported, run};
