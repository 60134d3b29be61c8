//! Why an alert did not reach its receiver. Each message says what failed, where (the
//! URL or the program) and what to do about it.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// The webhook URL cannot be posted to (not refused earlier: config validates it too).
    #[error(
        "webhook {url}: {reason}; fix: write `webhook = \"http://HOST:PORT/PATH\"` (plain HTTP; put a relay in front of an https endpoint)"
    )]
    Url { url: String, reason: String },
    /// No TCP connection to the receiver (retried).
    #[error(
        "webhook {url}: cannot connect to {addr}: {message}; fix: check that the receiver is running and listening there, and that no firewall is in between"
    )]
    Connect { url: String, addr: String, message: String },
    /// Connected, but the HTTP exchange broke off (retried).
    #[error("webhook {url}: the HTTP exchange failed: {message}; fix: check that {url} is an HTTP/1.1 server")]
    Exchange { url: String, message: String },
    /// No answer within the timeout (retried).
    #[error(
        "webhook {url}: no answer within {}; fix: make the receiver answer at once (queue the work) or check what holds the request", humantime::format_duration(*after)
    )]
    Timeout { url: String, after: Duration },
    /// The receiver answered, but not 2xx (5xx and 429 are retried, other codes are not;
    /// redirects are not followed).
    #[error("webhook {url}: answered {status}{}; fix: {}", body_part(body), status_fix(*status))]
    Status { url: String, status: u16, body: String },
    /// The alert id cannot be an HTTP header value (it never should: it is made of names
    /// and a UTC time).
    #[error("alert id `{alert_id}` has characters an HTTP header cannot carry; fix: report this as a bug")]
    AlertId { alert_id: String },
    /// The command could not be started.
    #[error(
        "command {program}: cannot start it: {message}; fix: check that the program exists and is executable (it is run as argv, without a shell; give an absolute path when it is not on the lab's PATH)"
    )]
    Spawn { program: String, message: String },
    /// The command ran and failed; `code` is `None` when a signal ended it.
    #[error("command {program}: {}{}; fix: run it by hand with the alert JSON on stdin and look at what it says", exit_part(*code), stderr_part(stderr))]
    Exit { program: String, code: Option<i32>, stderr: String },
    /// The command did not finish within the timeout and was killed.
    #[error(
        "command {program}: still running after {}, killed; fix: make it hand the alert off and return (background its slow part)", humantime::format_duration(*after)
    )]
    CommandTimeout { program: String, after: Duration },
}

impl NotifyError {
    /// Whether another try could succeed: connection trouble, timeouts, 5xx and 429.
    pub fn retryable(&self) -> bool {
        match self {
            NotifyError::Connect { .. } | NotifyError::Exchange { .. } | NotifyError::Timeout { .. } => true,
            NotifyError::Status { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }
}

fn status_fix(status: u16) -> &'static str {
    match status {
        300..=399 => "redirects are not followed: write the final URL in `webhook`",
        401 | 403 => {
            "the receiver refuses the lab: allow it (the lab sends no credentials; put them in the URL path or a relay)"
        }
        404 | 405 => "check the URL's path: the receiver has no POST handler there",
        429 | 500..=599 => "the receiver is overloaded or failing: look at its logs",
        _ => "look at the receiver's answer above and its logs",
    }
}

fn body_part(body: &str) -> String {
    if body.is_empty() { String::new() } else { format!(": {body}") }
}

fn exit_part(code: Option<i32>) -> String {
    match code {
        Some(c) => format!("exited with status {c}"),
        None => "was ended by a signal".to_string(),
    }
}

fn stderr_part(stderr: &str) -> String {
    if stderr.is_empty() { ", with nothing on stderr".to_string() } else { format!(", stderr: {stderr}") }
}

/// An answer as text for a message or the store: lossy UTF-8, at most
/// [`ANSWER_LIMIT`](super::ANSWER_LIMIT) bytes, trimmed.
pub(super) fn answer_text(bytes: &[u8]) -> String {
    let kept = &bytes[..bytes.len().min(super::ANSWER_LIMIT)];
    String::from_utf8_lossy(kept).trim().to_string()
}
