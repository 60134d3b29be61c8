//! The `sync:` service (AOSP adb/SYNC.TXT, file_sync_protocol.h): requests of a 4-byte id
//! and a u32 length, then a path. STAT, STA2/LST2 (stat_v2), LIST, SEND (DATA chunks then
//! DONE with the mtime, answered OKAY or FAIL), RECV (answered DATA chunks then DONE),
//! QUIT. Paths are the phone's: they live under ROOT/fs.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, UNIX_EPOCH};

use crate::store::Store;
use crate::streams::Stream;

/// The largest DATA chunk either side sends (SYNC_DATA_MAX).
const DATA_MAX: usize = 64 * 1024;
const PATH_MAX: u32 = 1024;
const ENOENT: u32 = 2;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn header(id: &[u8; 4], n: u32) -> Vec<u8> {
    let mut out = id.to_vec();
    out.extend_from_slice(&n.to_le_bytes());
    out
}

fn fail(message: &str) -> Vec<u8> {
    let mut out = header(b"FAIL", message.len() as u32);
    out.extend_from_slice(message.as_bytes());
    out
}

pub fn serve(mut stream: Stream, store: &Store) {
    if serve_requests(&mut stream, store).is_ok() {
        stream.close();
    }
}

fn serve_requests(stream: &mut Stream, store: &Store) -> io::Result<()> {
    loop {
        let mut request = [0u8; 8];
        if stream.read_exact(&mut request).is_err() {
            return Ok(()); // the host went away between requests
        }
        let id: [u8; 4] = request[..4].try_into().unwrap();
        let len = u32_at(&request, 4);
        if &id == b"QUIT" {
            return Ok(());
        }
        if len > PATH_MAX {
            return stream.write_all(&fail("path too long"));
        }
        let mut path = vec![0u8; len as usize];
        stream.read_exact(&mut path)?;
        let path = String::from_utf8_lossy(&path).to_string();
        let reply = match &id {
            b"STAT" => stat_v1(store, &path),
            b"STA2" | b"LST2" => stat_v2(store, &path, &id),
            b"LIST" => list(store, &path),
            b"RECV" => recv(store, &path),
            b"SEND" => send(stream, store, &path)?,
            _ => {
                stream.write_all(&fail(&format!("unknown sync command {}", String::from_utf8_lossy(&id))))?;
                return Ok(());
            }
        };
        stream.write_all(&reply)?;
    }
}

fn mtime(m: &fs::Metadata) -> u32 {
    m.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_secs() as u32)
}

fn stat_v1(store: &Store, path: &str) -> Vec<u8> {
    let mut out = b"STAT".to_vec();
    let (mode, size, time) = match fs::symlink_metadata(store.host_path(path)) {
        Ok(m) => (m.mode(), m.len() as u32, mtime(&m)),
        Err(_) => (0, 0, 0),
    };
    for v in [mode, size, time] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn stat_v2(store: &Store, path: &str, id: &[u8; 4]) -> Vec<u8> {
    let host = store.host_path(path);
    let meta = if id == b"LST2" { fs::symlink_metadata(&host) } else { fs::metadata(&host) };
    let mut out = id.to_vec();
    match meta {
        Ok(m) => {
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(&m.dev().to_le_bytes());
            out.extend_from_slice(&m.ino().to_le_bytes());
            // Files belong to the shell user (2000) as on a phone's /data/local/tmp.
            for v in [m.mode(), m.nlink() as u32, 2000, 2000] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&m.len().to_le_bytes());
            for t in [m.atime(), m.mtime(), m.ctime()] {
                out.extend_from_slice(&t.to_le_bytes());
            }
        }
        Err(_) => {
            out.extend_from_slice(&ENOENT.to_le_bytes());
            out.extend_from_slice(&[0u8; 64]);
        }
    }
    out
}

fn list(store: &Store, path: &str) -> Vec<u8> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(store.host_path(path)) {
        for e in entries.flatten() {
            let (Ok(m), name) = (e.metadata(), e.file_name().to_string_lossy().to_string()) else { continue };
            out.extend(header(b"DENT", m.mode()));
            for v in [m.len() as u32, mtime(&m), name.len() as u32] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(name.as_bytes());
        }
    }
    out.extend(header(b"DONE", 0));
    out.extend_from_slice(&[0u8; 12]);
    out
}

fn recv(store: &Store, path: &str) -> Vec<u8> {
    let host = store.host_path(path);
    let bytes = match fs::read(&host) {
        Ok(b) => b,
        Err(_) if host.is_dir() => return fail("Is a directory"),
        Err(_) => return fail("No such file or directory"),
    };
    let mut out = Vec::with_capacity(bytes.len() + 16);
    for chunk in bytes.chunks(DATA_MAX) {
        out.extend(header(b"DATA", chunk.len() as u32));
        out.extend_from_slice(chunk);
    }
    out.extend(header(b"DONE", 0));
    out
}

/// SEND `path,mode`: takes DATA chunks until DONE, then answers.
fn send(stream: &mut Stream, store: &Store, spec: &str) -> io::Result<Vec<u8>> {
    let (path, mode) = match spec.rsplit_once(',') {
        Some((p, m)) => (p, m.parse::<u32>().unwrap_or(0o644)),
        None => (spec, 0o644),
    };
    let mut data = Vec::new();
    let mtime = loop {
        let mut h = [0u8; 8];
        stream.read_exact(&mut h)?;
        let n = u32_at(&h, 4);
        match &h[..4] {
            b"DATA" if n as usize <= DATA_MAX => {
                let mut chunk = vec![0u8; n as usize];
                stream.read_exact(&mut chunk)?;
                data.extend_from_slice(&chunk);
            }
            b"DONE" => break n,
            _ => return Ok(fail("invalid data message")),
        }
    };
    let host = store.host_path(path);
    if host.is_dir() {
        return Ok(fail(&format!("couldn't create file: {path}: Is a directory")));
    }
    if let Some(dir) = host.parent() {
        fs::create_dir_all(dir)?;
    }
    let written = fs::write(&host, &data).and_then(|()| {
        fs::set_permissions(&host, fs::Permissions::from_mode(mode & 0o777))?;
        fs::File::options().write(true).open(&host)?.set_modified(UNIX_EPOCH + Duration::from_secs(u64::from(mtime)))
    });
    Ok(match written {
        Ok(()) => header(b"OKAY", 0),
        Err(e) => fail(&format!("couldn't create file: {e}")),
    })
}
