//! The Otii 3 TCP server's protocol: one JSON object per line, each ended by CRLF; the
//! server greets first; each request carries a `trans_id` (a string) that its reply echoes;
//! `progress` messages may come before a reply; an error reply has `type: "error"`, an
//! `errorcode` and data. As Qoitech's own client (`otii-tcp-client`) reads it; see
//! docs/platforms/monitors.md.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::OtiiError;

/// The longest line a reply may be (a chunk of 40 000 samples is about 1 MB).
const MAX_LINE: usize = 16 << 20;

/// One connection to an Otii server.
pub struct Connection {
    address: String,
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    next_id: u64,
    /// How long a reply may take.
    pub timeout: Duration,
}

impl Connection {
    /// Connects to `address` (`HOST:PORT`) and reads the server's greeting, each within
    /// `timeout`.
    pub async fn connect(address: &str, timeout: Duration) -> Result<Connection, OtiiError> {
        let unreachable = |why: String| OtiiError::Unreachable { address: address.to_string(), why };
        let stream = tokio::time::timeout(timeout, TcpStream::connect(address))
            .await
            .map_err(|_| unreachable(format!("no connection within {} s", timeout.as_secs_f64())))?
            .map_err(|e| unreachable(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let (read, writer) = stream.into_split();
        let mut c =
            Connection { address: address.to_string(), reader: BufReader::new(read), writer, next_id: 1, timeout };
        let greeting = c.read_message("the greeting").await?;
        if greeting["type"] != "information" || greeting["info"] != "connected" {
            return Err(OtiiError::Protocol(format!("a greeting that is not `connected`: {greeting}")));
        }
        Ok(c)
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// Sends `cmd` with `data` (none when `Value::Null`) and waits for its reply: its
    /// `data` (`Value::Null` when it has none), or the server's refusal.
    pub async fn request(&mut self, cmd: &str, data: Value) -> Result<Value, OtiiError> {
        let trans_id = self.next_id.to_string();
        self.next_id += 1;
        let mut message = json!({"type": "request", "cmd": cmd, "trans_id": trans_id});
        if !data.is_null() {
            message["data"] = data;
        }
        let line = format!("{message}\r\n");
        self.writer.write_all(line.as_bytes()).await.map_err(|e| self.closed(cmd, &e.to_string()))?;
        loop {
            let reply = self.read_message(cmd).await?;
            match reply["type"].as_str() {
                Some("progress") => continue,
                Some("response") | Some("error") if reply["trans_id"] != trans_id.as_str() => {
                    return Err(OtiiError::Protocol(format!(
                        "the reply to `{}` where `{cmd}`'s ({trans_id}) was awaited",
                        reply["trans_id"]
                    )));
                }
                Some("response") => return Ok(reply.get("data").cloned().unwrap_or(Value::Null)),
                Some("error") => return Err(refusal(cmd, &reply)),
                // An information message the server sends on its own (a device found or
                // lost): not a reply.
                Some("information") => continue,
                _ => return Err(OtiiError::Protocol(format!("a message of no known type: {reply}"))),
            }
        }
    }

    async fn read_message(&mut self, during: &str) -> Result<Value, OtiiError> {
        let mut line = Vec::new();
        let read = self.reader.read_until(b'\n', &mut line);
        let n = tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| OtiiError::Timeout {
                address: self.address.clone(),
                cmd: during.to_string(),
                seconds: self.timeout.as_secs_f64(),
            })?
            .map_err(|e| self.closed(during, &e.to_string()))?;
        if line.len() > MAX_LINE {
            return Err(OtiiError::Protocol(format!("a message of {} bytes", line.len())));
        }
        if n == 0 || !line.ends_with(b"\r\n") {
            return Err(self.closed(during, ""));
        }
        serde_json::from_slice(&line[..line.len() - 2]).map_err(|e| OtiiError::Protocol(format!("not JSON: {e}")))
    }

    fn closed(&self, during: &str, why: &str) -> OtiiError {
        let why = if why.is_empty() { String::new() } else { format!(": {why}") };
        OtiiError::Closed { address: self.address.clone(), during: format!(" during `{during}`{why}") }
    }
}

/// An error reply as a [`OtiiError::Refused`]: its code, and the data fields Qoitech's
/// client shows for it.
fn refusal(cmd: &str, reply: &Value) -> OtiiError {
    let code = reply["errorcode"].as_str().unwrap_or("unknown error").to_string();
    let data = &reply["data"];
    let detail = match (data.get("message"), data.get("key"), data.get("device_id")) {
        (Some(m), _, _) => format!(" ({})", m.as_str().unwrap_or_default()),
        (_, Some(k), _) => match data.get("value") {
            Some(v) => format!(" (`{}` = {v})", k.as_str().unwrap_or_default()),
            None => format!(" (`{}`)", k.as_str().unwrap_or_default()),
        },
        (_, _, Some(d)) => format!(" (device {})", d.as_str().unwrap_or_default()),
        _ => String::new(),
    };
    OtiiError::Refused { cmd: cmd.to_string(), code, detail }
}
