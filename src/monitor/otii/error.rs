//! What can go wrong with an Otii server.

#[derive(Debug, thiserror::Error)]
pub enum OtiiError {
    #[error(
        "cannot reach the Otii server at {address}: {why}; fix: start the Otii 3 server there (Otii 3 → Server) or set the monitor's `address`"
    )]
    Unreachable { address: String, why: String },
    #[error("the Otii server at {address} closed the connection{during}")]
    Closed { address: String, during: String },
    #[error("the Otii server at {address} did not answer `{cmd}` within {seconds} s")]
    Timeout { address: String, cmd: String, seconds: f64 },
    /// The server's error reply: its `errorcode` and what its data says.
    #[error("the Otii server refused `{cmd}`: {code}{detail}")]
    Refused { cmd: String, code: String, detail: String },
    #[error("the Otii server sent something this lab cannot read ({0})")]
    Protocol(String),
    #[error(
        "no Otii automation licence is free on the server at {address}; fix: return one in Otii 3 (Help → Licenses) or wait for its holder"
    )]
    NoLicence { address: String },
    #[error(
        "the Otii at {address} recorded no sample within {seconds} s of starting a recording; fix: check in Otii 3 that the instrument is connected and its main current channel records"
    )]
    NotSampling { address: String, seconds: f64 },
    #[error("the Otii server at {address} has no {wanted}; it has: {have}")]
    NoDevice { address: String, wanted: String, have: String },
}
