//! Lockdown services reached over RSD (`….shim.remote`, entitlement
//! `com.apple.mobile.lockdown.remote.trusted`): remoted has lockdownd start the service once
//! the host checks in, then the stream is the service's, framed as over lockdown.
//!
//! The check-in follows the clients (pymobiledevice3 `remote/remote_service_discovery.py`
//! `start_lockdown_service`, go-ios `ios/rsd.go` `RsdCheckin`, idevice `Idevice::rsd_checkin`):
//! the host sends `{Label, ProtocolVersion: "2", Request: RSDCheckin}` (plist frames, 4-byte
//! big-endian length); the phone answers `{Request: RSDCheckin}`, then `{Request:
//! StartService}` once the service runs (an `Error` key there when it could not start).
//! Those are the keys every client reads; no capture of the replies' other keys is public
//! in those sources, so the stand-in sends none.

use std::io::{self, Read, Write};
use std::sync::Arc;

use plist::Value;

use crate::Server;
use crate::phone::Store;
use crate::tcp::Stream;
use crate::wire::{self, dict};

pub const PCAPD: &str = "com.apple.pcapd.shim.remote";
pub const JOURNAL: &str = "rsd";

/// Reads the host's check-in and answers it; `false` (nothing answered) for anything else,
/// which the shims answer by closing the connection.
fn checkin(s: &mut (impl Read + Write), store: &Store, udid: &str, service: &str) -> io::Result<bool> {
    let Some(request) = wire::read_plist(s)? else { return Ok(false) };
    let text = |k: &str| request.get(k).and_then(Value::as_string).map(str::to_string);
    let kind = text("Request");
    store.journal(
        udid,
        JOURNAL,
        "RSDCheckin",
        serde_json::json!({"shim": service, "Request": kind, "Label": text("Label"),
            "ProtocolVersion": text("ProtocolVersion")}),
    );
    if kind.as_deref() != Some("RSDCheckin") {
        return Ok(false);
    }
    wire::write_plist(s, dict([("Request", "RSDCheckin".into())]))?;
    wire::write_plist(s, dict([("Request", "StartService".into())]))?;
    Ok(true)
}

/// pcapd.shim.remote: the check-in, then lockdown's pcapd on the same stream.
pub fn serve_pcapd(mut stream: Stream, server: &Arc<Server>, udid: &str) -> io::Result<()> {
    if !checkin(&mut stream, &server.store, udid, PCAPD)? {
        return Ok(());
    }
    crate::pcapd::serve(stream, server, udid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    fn host_sends(request: &str) -> (bool, Vec<plist::Dictionary>, Vec<serde_json::Value>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let (mut host, mut phone) = UnixStream::pair().unwrap();
        let asked = dict([("Label", "lab".into()), ("ProtocolVersion", "2".into()), ("Request", request.into())]);
        wire::write_plist(&mut host, asked).unwrap();
        let started = checkin(&mut phone, &store, "U", PCAPD).unwrap();
        drop(phone);
        let mut replies = Vec::new();
        while let Some(r) = wire::read_plist(&mut host).unwrap() {
            replies.push(r);
        }
        let journal = std::fs::read_to_string(dir.path().join("journal.jsonl")).unwrap_or_default();
        (started, replies, journal.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
    }

    #[test]
    fn a_checkin_is_answered_with_rsdcheckin_then_startservice() {
        let (started, replies, journal) = host_sends("RSDCheckin");
        assert!(started);
        let requests: Vec<_> = replies.iter().map(|r| wire::string(r, "Request").unwrap()).collect();
        assert_eq!(requests, ["RSDCheckin", "StartService"]);
        assert!(replies.iter().all(|r| r.len() == 1 && !r.contains_key("Error")), "{replies:?}");
        assert_eq!(journal[0]["service"], JOURNAL);
        assert_eq!(
            (&journal[0]["shim"], &journal[0]["Label"], &journal[0]["ProtocolVersion"]),
            (&PCAPD.into(), &"lab".into(), &"2".into())
        );
    }

    #[test]
    fn anything_but_a_checkin_gets_no_answer() {
        let (started, replies, journal) = host_sends("StartService");
        assert!(!started);
        assert!(replies.is_empty(), "{replies:?}");
        assert_eq!(journal[0]["Request"], "StartService");
    }
}
