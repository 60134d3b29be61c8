//! AFC (com.apple.afc, and com.apple.crashreportcopymobile on the crash-report folder),
//! the part an install and a crash-report pull use: ReadDir, MakeDir, GetFileInfo,
//! RemovePath, FileRefOpen/Write/Read/Seek/Tell/Close, GetDeviceInfo. A packet is a 40-byte header
//! of little-endian u64s (magic "CFA6LPAA", whole length, header+header-payload length,
//! packet number, opcode), the header payload, then the data. The phone's jail is
//! DIR/media/<UDID> (crash-report copy: DIR/crashes/<UDID>).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::net::UnixStream;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::Server;

pub const MAGIC: u64 = 0x4141_504c_3641_4643;
const HEADER: usize = 40;

pub const OP_STATUS: u64 = 0x01;
pub const OP_DATA: u64 = 0x02;
pub const OP_READ_DIR: u64 = 0x03;
pub const OP_REMOVE_PATH: u64 = 0x08;
pub const OP_MAKE_DIR: u64 = 0x09;
pub const OP_GET_FILE_INFO: u64 = 0x0a;
pub const OP_GET_DEV_INFO: u64 = 0x0b;
pub const OP_FILE_OPEN: u64 = 0x0d;
pub const OP_FILE_OPEN_RES: u64 = 0x0e;
pub const OP_READ: u64 = 0x0f;
pub const OP_WRITE: u64 = 0x10;
pub const OP_FILE_SEEK: u64 = 0x11;
pub const OP_FILE_TELL: u64 = 0x12;
pub const OP_FILE_TELL_RES: u64 = 0x13;
pub const OP_FILE_CLOSE: u64 = 0x14;

// AFC status codes (afc.h `afc_error_t`).
const E_SUCCESS: u64 = 0;
const E_UNKNOWN_PACKET: u64 = 6;
const E_INVALID_ARG: u64 = 7;
const E_NOT_FOUND: u64 = 8;
const E_IS_DIR: u64 = 9;
const E_PERM_DENIED: u64 = 10;

#[derive(Debug, Clone, PartialEq)]
pub struct Packet {
    pub number: u64,
    pub op: u64,
    pub header_payload: Vec<u8>,
    pub payload: Vec<u8>,
}

impl Packet {
    pub fn encode(&self) -> Vec<u8> {
        let this_len = (HEADER + self.header_payload.len()) as u64;
        let mut out = Vec::with_capacity(this_len as usize + self.payload.len());
        for v in [MAGIC, this_len + self.payload.len() as u64, this_len, self.number, self.op] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.header_payload);
        out.extend_from_slice(&self.payload);
        out
    }

    pub fn read_from(r: &mut impl Read) -> io::Result<Option<Self>> {
        let mut h = [0u8; HEADER];
        match r.read_exact(&mut h) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let w = |i: usize| u64::from_le_bytes(h[i * 8..i * 8 + 8].try_into().unwrap());
        let (entire, this) = (w(1) as usize, w(2) as usize);
        if w(0) != MAGIC || this < HEADER || entire < this || entire > 64 << 20 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not an AFC packet"));
        }
        let mut header_payload = vec![0; this - HEADER];
        r.read_exact(&mut header_payload)?;
        let mut payload = vec![0; entire - this];
        r.read_exact(&mut payload)?;
        Ok(Some(Packet { number: w(3), op: w(4), header_payload, payload }))
    }
}

/// A path inside the jail; `None` for one that leaves it.
pub fn resolve(jail: &Path, path: &str) -> Option<PathBuf> {
    let mut out = jail.to_path_buf();
    for c in Path::new(path.trim_end_matches('\0')).components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim_end_matches('\0').to_string()
}

fn u64_at(bytes: &[u8], i: usize) -> Option<u64> {
    bytes.get(i * 8..i * 8 + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()))
}

fn nul_joined<I: IntoIterator<Item = String>>(items: I) -> Vec<u8> {
    let mut out = Vec::new();
    for s in items {
        out.extend_from_slice(s.as_bytes());
        out.push(0);
    }
    out
}

fn status_of(e: &io::Error) -> u64 {
    match e.kind() {
        io::ErrorKind::NotFound => E_NOT_FOUND,
        io::ErrorKind::PermissionDenied => E_PERM_DENIED,
        io::ErrorKind::IsADirectory => E_IS_DIR,
        _ => E_INVALID_ARG,
    }
}

fn file_info(path: &Path) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    let ns = |s: i64, n: i64| (s * 1_000_000_000 + n).to_string();
    Ok(nul_joined([
        "st_size".into(),
        m.len().to_string(),
        "st_blocks".into(),
        m.blocks().to_string(),
        "st_nlink".into(),
        m.nlink().to_string(),
        "st_ifmt".into(),
        if m.is_dir() { "S_IFDIR" } else { "S_IFREG" }.into(),
        "st_mtime".into(),
        ns(m.mtime(), m.mtime_nsec()),
        "st_birthtime".into(),
        ns(m.ctime(), m.ctime_nsec()),
    ]))
}

/// What one request answers: `(opcode, header payload, data)`.
type Reply = (u64, Vec<u8>, Vec<u8>);

fn status(code: u64) -> Reply {
    (OP_STATUS, code.to_le_bytes().to_vec(), Vec::new())
}

struct Afc {
    jail: PathBuf,
    files: HashMap<u64, File>,
    next_fd: u64,
}

impl Afc {
    fn path(&self, bytes: &[u8]) -> io::Result<PathBuf> {
        resolve(&self.jail, &text(bytes)).ok_or_else(|| io::ErrorKind::PermissionDenied.into())
    }

    fn handle(&mut self, p: &Packet) -> io::Result<Reply> {
        Ok(match p.op {
            OP_READ_DIR => {
                let mut names = vec![".".to_string(), "..".to_string()];
                for e in std::fs::read_dir(self.path(&p.header_payload)?)? {
                    names.push(e?.file_name().to_string_lossy().into_owned());
                }
                (OP_DATA, Vec::new(), nul_joined(names))
            }
            OP_MAKE_DIR => {
                std::fs::create_dir_all(self.path(&p.header_payload)?)?;
                status(E_SUCCESS)
            }
            OP_GET_FILE_INFO => (OP_DATA, Vec::new(), file_info(&self.path(&p.header_payload)?)?),
            OP_GET_DEV_INFO => {
                let kv = ["Model", "iPhone14,2", "FSTotalBytes", "127989493760", "FSFreeBytes", "64000000000"];
                let mut kv: Vec<String> = kv.iter().map(|s| s.to_string()).collect();
                kv.extend(["FSBlockSize".into(), "4096".into()]);
                (OP_DATA, Vec::new(), nul_joined(kv))
            }
            OP_REMOVE_PATH => {
                let path = self.path(&p.header_payload)?;
                if path.is_dir() {
                    std::fs::remove_dir(path)?
                } else {
                    std::fs::remove_file(path)?
                }
                status(E_SUCCESS)
            }
            OP_FILE_OPEN => {
                let mode = u64_at(&p.header_payload, 0).ok_or(io::ErrorKind::InvalidInput)?;
                let path = self.path(&p.header_payload[8..])?;
                let mut o = std::fs::OpenOptions::new();
                // AfcFopenMode: 1 r, 2 r+, 3 w, 4 w+, 5 a, 6 a+.
                match mode {
                    1 => o.read(true),
                    2 => o.read(true).write(true).create(true),
                    3 => o.write(true).create(true).truncate(true),
                    4 => o.read(true).write(true).create(true).truncate(true),
                    5 => o.append(true).create(true),
                    6 => o.read(true).append(true).create(true),
                    _ => return Ok(status(E_INVALID_ARG)),
                };
                let file = o.open(path)?;
                self.next_fd += 1;
                self.files.insert(self.next_fd, file);
                (OP_FILE_OPEN_RES, self.next_fd.to_le_bytes().to_vec(), Vec::new())
            }
            OP_FILE_SEEK | OP_FILE_TELL => {
                let fd = u64_at(&p.header_payload, 0).ok_or(io::ErrorKind::InvalidInput)?;
                let Some(file) = self.files.get_mut(&fd) else { return Ok(status(E_INVALID_ARG)) };
                if p.op == OP_FILE_TELL {
                    return Ok((OP_FILE_TELL_RES, file.stream_position()?.to_le_bytes().to_vec(), Vec::new()));
                }
                // fd, whence (0 set, 1 cur, 2 end), offset (signed).
                let offset = u64_at(&p.header_payload, 2).ok_or(io::ErrorKind::InvalidInput)? as i64;
                let to = match u64_at(&p.header_payload, 1) {
                    Some(0) => SeekFrom::Start(offset.max(0) as u64),
                    Some(1) => SeekFrom::Current(offset),
                    Some(2) => SeekFrom::End(offset),
                    _ => return Ok(status(E_INVALID_ARG)),
                };
                file.seek(to)?;
                status(E_SUCCESS)
            }
            OP_WRITE | OP_READ | OP_FILE_CLOSE => {
                let fd = u64_at(&p.header_payload, 0).ok_or(io::ErrorKind::InvalidInput)?;
                if p.op == OP_FILE_CLOSE {
                    return Ok(status(if self.files.remove(&fd).is_some() { E_SUCCESS } else { E_INVALID_ARG }));
                }
                let Some(file) = self.files.get_mut(&fd) else { return Ok(status(E_INVALID_ARG)) };
                if p.op == OP_WRITE {
                    file.write_all(&p.payload)?;
                    status(E_SUCCESS)
                } else {
                    let want = u64_at(&p.header_payload, 1).unwrap_or(0).min(1 << 20);
                    let mut data = Vec::new();
                    file.take(want).read_to_end(&mut data)?;
                    (OP_DATA, Vec::new(), data)
                }
            }
            _ => status(E_UNKNOWN_PACKET),
        })
    }
}

fn op_name(op: u64) -> &'static str {
    match op {
        OP_READ_DIR => "ReadDir",
        OP_REMOVE_PATH => "RemovePath",
        OP_MAKE_DIR => "MakeDir",
        OP_GET_FILE_INFO => "GetFileInfo",
        OP_GET_DEV_INFO => "GetDeviceInfo",
        OP_FILE_OPEN => "FileRefOpen",
        OP_READ => "FileRefRead",
        OP_WRITE => "FileRefWrite",
        OP_FILE_CLOSE => "FileRefClose",
        OP_FILE_SEEK => "FileRefSeek",
        OP_FILE_TELL => "FileRefTell",
        _ => "Unknown",
    }
}

/// AFC rooted at `jail`: the media folder (com.apple.afc) or the crash reports
/// (com.apple.crashreportcopymobile); journalled under `service`.
pub fn serve(mut s: UnixStream, server: &Arc<Server>, udid: &str, service: &str, jail: PathBuf) -> io::Result<()> {
    std::fs::create_dir_all(&jail)?;
    let mut afc = Afc { jail, files: HashMap::new(), next_fd: 0 };
    while let Some(p) = Packet::read_from(&mut s)? {
        // Paths are journalled; file data only by its size.
        let arg = match p.op {
            OP_FILE_OPEN => serde_json::json!({"path": text(p.header_payload.get(8..).unwrap_or_default())}),
            OP_WRITE => serde_json::json!({"bytes": p.payload.len()}),
            OP_READ | OP_FILE_CLOSE | OP_FILE_SEEK | OP_FILE_TELL => serde_json::json!({}),
            _ => serde_json::json!({"path": text(&p.header_payload)}),
        };
        if p.op != OP_WRITE && p.op != OP_READ {
            server.store.journal(udid, service, op_name(p.op), arg);
        }
        let (op, header_payload, payload) = afc.handle(&p).unwrap_or_else(|e| status(status_of(&e)));
        s.write_all(&Packet { number: p.number, op, header_payload, payload }.encode())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_round_trips_with_its_lengths() {
        let p =
            Packet { number: 3, op: OP_WRITE, header_payload: 7u64.to_le_bytes().to_vec(), payload: b"abc".to_vec() };
        let bytes = p.encode();
        assert_eq!(&bytes[..8], b"CFA6LPAA");
        assert_eq!(u64_at(&bytes, 1), Some(40 + 8 + 3));
        assert_eq!(u64_at(&bytes, 2), Some(40 + 8));
        assert_eq!(Packet::read_from(&mut bytes.as_slice()).unwrap(), Some(p));
        assert_eq!(Packet::read_from(&mut [].as_slice()).unwrap(), None);
    }

    #[test]
    fn paths_stay_in_the_jail() {
        let jail = Path::new("/j");
        assert_eq!(resolve(jail, "PublicStaging/idevice.ipa"), Some(PathBuf::from("/j/PublicStaging/idevice.ipa")));
        assert_eq!(resolve(jail, "/PublicStaging\0"), Some(PathBuf::from("/j/PublicStaging")));
        assert_eq!(resolve(jail, "../etc/passwd"), None);
    }

    #[test]
    fn a_staged_upload_is_written_read_back_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut afc = Afc { jail: dir.path().to_path_buf(), files: HashMap::new(), next_fd: 0 };
        let mut req = |op: u64, hp: Vec<u8>, payload: &[u8]| {
            afc.handle(&Packet { number: 0, op, header_payload: hp, payload: payload.to_vec() })
        };
        assert!(req(OP_GET_FILE_INFO, b"PublicStaging".to_vec(), b"").is_err(), "missing before mkdir");
        assert_eq!(req(OP_MAKE_DIR, b"PublicStaging".to_vec(), b"").unwrap(), status(E_SUCCESS));
        let mut open = 3u64.to_le_bytes().to_vec();
        open.extend_from_slice(b"PublicStaging/a.ipa");
        let (op, fd, _) = req(OP_FILE_OPEN, open, b"").unwrap();
        assert_eq!(op, OP_FILE_OPEN_RES);
        assert_eq!(req(OP_WRITE, fd.clone(), b"hello").unwrap(), status(E_SUCCESS));
        assert_eq!(req(OP_FILE_CLOSE, fd.clone(), b"").unwrap(), status(E_SUCCESS));
        assert_eq!(req(OP_FILE_CLOSE, fd, b"").unwrap(), status(E_INVALID_ARG), "closed twice");
        let (_, _, info) = req(OP_GET_FILE_INFO, b"PublicStaging/a.ipa".to_vec(), b"").unwrap();
        let info = String::from_utf8(info).unwrap();
        assert!(info.starts_with("st_size\x005\x00") && info.contains("st_ifmt\x00S_IFREG\x00"), "{info:?}");
        let (_, _, list) = req(OP_READ_DIR, b"PublicStaging".to_vec(), b"").unwrap();
        assert_eq!(list, b".\0..\0a.ipa\0");
        assert_eq!(req(OP_REMOVE_PATH, b"PublicStaging/a.ipa".to_vec(), b"").unwrap(), status(E_SUCCESS));
        let gone = req(OP_REMOVE_PATH, b"PublicStaging/a.ipa".to_vec(), b"").unwrap_err();
        assert_eq!(status_of(&gone), E_NOT_FOUND);
    }
}
