//! `ValueError`: why a value as written (a duration, a percentage, `host:port`, a device
//! selector, an attested value) does not read. Each message is a clause that callers put
//! after what they were reading (`invalid duration: …`, `"x" is not a host and port: …`).

/// The units a duration may have, for messages.
const UNIT_LIST: &str = "ms, s, m (or min), h, d";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValueError {
    #[error("empty duration")]
    EmptyDuration,
    #[error("`{text}` is not a duration (expected a number, then a unit: {UNIT_LIST})")]
    NotADuration { text: String },
    #[error("`{text}` has a number without a unit (units: {UNIT_LIST})")]
    NoUnit { text: String },
    #[error("unknown unit `{unit}` in `{text}` (units: {UNIT_LIST})")]
    UnknownUnit { unit: String, text: String },
    #[error("`{number}` in `{text}` is not a number")]
    NotANumber { number: String, text: String },
    #[error("`{text}` is too long")]
    TooLong { text: String },

    #[error("`{text}` has no `%` (write \"5%\", or the fraction 0.05 without quotes)")]
    NoPercentSign { text: String },
    #[error("`{text}` is not a percentage (write a number followed by %, e.g. \"5%\")")]
    NotAPercentage { text: String },
    #[error("`{text}` is negative")]
    Negative { text: String },

    #[error("`[` without `]`")]
    UnclosedBracket,
    #[error("`{text}` is not an IPv6 address")]
    NotIpv6 { text: String },
    #[error("`{rest}` after the address")]
    AfterAddress { rest: String },
    #[error("an IPv6 address goes in brackets, e.g. `[::1]:5037`")]
    Ipv6WithoutBrackets,
    #[error("`{host}` is not a host name or IP address")]
    NotAHost { host: String },
    #[error("port `{port}` is not 1 to 65535")]
    BadPort { port: String },
    #[error("no port")]
    NoPort,

    #[error("empty selector")]
    EmptySelector,
    #[error("`{text}` names no {kind}")]
    SelectorNamesNothing { text: String, kind: &'static str },
    #[error("unknown selector kind `{kind}:` in `{text}`")]
    UnknownSelectorKind { kind: String, text: String },
    #[error("`{text}` is not a valid glob: {why}")]
    BadGlob { text: String, why: globset::ErrorKind },

    #[error("brightness is a percentage from 0 to 100, not `{text}`")]
    Brightness { text: String },
    #[error("{key} is `on` or `off`, not `{text}`")]
    NotASwitch { key: &'static str, text: String },
}
