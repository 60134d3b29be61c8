//! `com.apple.coredevice.diagnosticsservice`: `capturesysdiagnose` answers
//! `{preferredFilename, fileTransfer: {expectedLength}}` (the keys pymobiledevice3's
//! `remote/core_device/diagnostics_service.py` reads), then, once the host opens stream 2 with
//! a FILE_TX_STREAM_RESPONSE wrapper (`iter_file_chunks` of pymobiledevice3's `remotexpc.py`
//! for file 0), sends the archive as raw DATA on stream 2 within the host's windows and ends
//! the stream with an empty END_STREAM frame.
//!
//! What archive: the newest one `iphone sysdiagnose` staged for the phone in
//! `DIR/sysdiagnose/<UDID>/` (the stand-in's way of having "made" one), removed once it is
//! streamed; with none staged the invocation gets a CoreDevice error.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::Server;
use crate::coredevice::{answer, error, serve as serve_invocations};
use crate::http2::XpcConn;
use crate::phone::Store;
use crate::tcp::Stream;
use crate::xpc::{self, Xpc, dict};

pub const CAPTURE: &str = "com.apple.coredevice.feature.capturesysdiagnose";
const JOURNAL: &str = "diagnosticsservice";
/// File transfers of an answer go on stream (index + 1) × 2; this service sends one.
const FILE_STREAM: u32 = 2;

/// Where `iphone sysdiagnose` leaves an iOS 17+ phone's next capture.
pub fn staged_dir(store: &Store, udid: &str) -> PathBuf {
    store.root().join("sysdiagnose").join(udid)
}

fn newest(dir: &Path) -> io::Result<Option<PathBuf>> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(d) => d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    // The name carries its time (sysdiagnose_YYYY.MM.DD_HH-MM-SS…): newest last.
    names.retain(|n| n.starts_with("sysdiagnose_") && n.ends_with(".tar.gz"));
    names.sort();
    Ok(names.pop().map(|n| dir.join(n)))
}

fn capture<S: Read + Write>(c: &mut XpcConn<S>, server: &Server, udid: &str, id: u64, input: &Xpc) -> io::Result<()> {
    let dry_run = input.get("isDryRun").and_then(Xpc::as_bool).unwrap_or(false);
    let full_logs = input.at(&["options", "collectFullLogs"]).and_then(Xpc::as_bool);
    let line = serde_json::json!({"isDryRun": dry_run, "collectFullLogs": full_logs});
    let Some(path) = newest(&staged_dir(&server.store, udid))? else {
        let mut line = line;
        line["error"] = "no sysdiagnose staged".into();
        server.store.journal(udid, JOURNAL, "capture", line);
        let e = error(
            10005,
            "Failed to capture a sysdiagnose: none is staged on this stand-in (run `iphone sysdiagnose`).",
            None,
        );
        return answer(c, id, Err(e));
    };
    let bytes = std::fs::read(&path)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let output = dict([
        ("fileTransfer", dict([("expectedLength", Xpc::UInt64(bytes.len() as u64))])),
        ("preferredFilename", name.clone().into()),
    ]);
    answer(c, id, Ok(output))?;
    // The host asks for the bytes by opening the transfer's stream.
    let mut asked = false;
    while let Some((stream, m)) = c.next()? {
        if stream == FILE_STREAM && m.flags & xpc::FILE_TX_STREAM_RESPONSE != 0 && c.opened(FILE_STREAM) {
            asked = true;
            break;
        }
    }
    let mut line = line;
    line["archive"] = name.into();
    line["bytes"] = bytes.len().into();
    line["sha256"] = hex::encode(Sha256::digest(&bytes)).into();
    line["streamed"] = asked.into();
    if asked {
        c.send_data(FILE_STREAM, &bytes, false)?;
        c.send_data(FILE_STREAM, &[], true)?;
    }
    // Journalled before the archive is removed: a test that waits for it to go then reads
    // the journal (it raced the line once).
    server.store.journal(udid, JOURNAL, "capture", line);
    if asked && !dry_run {
        std::fs::remove_file(&path)?;
    }
    Ok(())
}

pub fn serve(stream: Stream, server: &Arc<Server>, udid: &str) -> io::Result<()> {
    serve_invocations(stream, |c, inv| match inv.feature.as_str() {
        CAPTURE => capture(c, server, udid, inv.id, &inv.input),
        other => {
            server.store.journal(udid, JOURNAL, "unsupported", serde_json::json!({"feature": other}));
            answer(c, inv.id, Err(error(1, &format!("The feature {other} is not supported by this device."), None)))
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_newest_staged_archive_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(super::newest(&dir.path().join("none")).unwrap(), None);
        for n in [
            "sysdiagnose_2026.03.01_10-00-00+0000_iPhone-OS_iPhone_21F90.tar.gz",
            "sysdiagnose_2026.03.01_11-00-00+0000_iPhone-OS_iPhone_21F90.tar.gz",
            ".sysdiagnose_2026.03.01_12-00-00+0000_iPhone-OS_iPhone_21F90.tar.gz.partial",
        ] {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        let got = super::newest(dir.path()).unwrap().unwrap();
        assert!(got.ends_with("sysdiagnose_2026.03.01_11-00-00+0000_iPhone-OS_iPhone_21F90.tar.gz"), "{got:?}");
    }
}
