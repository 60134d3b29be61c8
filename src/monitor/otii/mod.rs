//! A Qoitech Otii Arc or Ace through the Otii 3 TCP server: the protocol (`connection`),
//! a measuring session on one instrument (`session`), and that session as the runner's
//! `PowerMonitor` (`otii_monitor`).

mod connection;
mod error;
mod otii_monitor;
mod session;

pub use connection::Connection;
pub use error::OtiiError;
pub use otii_monitor::OtiiMonitor;
pub use session::{Session, SessionSettings};
