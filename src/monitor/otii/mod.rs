//! A Qoitech Otii Arc or Ace through the Otii 3 TCP server: the protocol (`connection`),
//! and a measuring session on one instrument (`session`).

mod connection;
mod error;
mod session;

pub use connection::Connection;
pub use error::OtiiError;
pub use session::{Session, SessionSettings};
