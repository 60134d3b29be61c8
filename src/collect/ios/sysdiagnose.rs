//! A sysdiagnose archive (`sysdiagnose_<time>_<OS>_<model>_<build>.tar.gz`): only its
//! powerlogs are taken, `…/logs/powerlogs/*.PLSQL` (also gzipped, `.PLSQL.gz`), streamed out of
//! the archive without unpacking anything else (archives run to hundreds of MB, and hold far
//! more than the lab needs).

use std::io::Read;

use crate::collect::parse_error::ParseError;

/// One powerlog database found in the archive: its path there and its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerlogFile {
    pub path: String,
    pub bytes: Vec<u8>,
}

fn is_powerlog(path: &str) -> bool {
    let p = path.to_ascii_lowercase();
    p.contains("logs/powerlogs/") && (p.ends_with(".plsql") || p.ends_with(".plsql.gz"))
}

/// The archive's powerlogs, sorted by path (their names carry the time they were started:
/// `powerlog_YYYY-MM-DD_HH-MM_<id>.PLSQL`, so the last is the newest).
pub fn powerlogs(archive: impl Read) -> Result<Vec<PowerlogFile>, ParseError> {
    let bad = |what: String| ParseError::Byte { offset: 0, message: what };
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let mut out = Vec::new();
    let entries = tar.entries().map_err(|e| bad(format!("not a gzipped tar archive: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| bad(format!("the archive is truncated or corrupt: {e}")))?;
        let path = entry.path().map(|p| p.display().to_string()).unwrap_or_default();
        if !entry.header().entry_type().is_file() || !is_powerlog(&path) {
            continue;
        }
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(|e| bad(format!("{path}: cannot be read out of the archive: {e}")))?;
        if path.to_ascii_lowercase().ends_with(".gz") {
            let mut plain = Vec::new();
            flate2::read::GzDecoder::new(bytes.as_slice())
                .read_to_end(&mut plain)
                .map_err(|e| bad(format!("{path}: not a readable gzip file: {e}")))?;
            bytes = plain;
        }
        out.push(PowerlogFile { path, bytes });
    }
    if out.is_empty() {
        return Err(bad(
            "no logs/powerlogs/*.PLSQL in the archive: not a sysdiagnose, or one taken without its powerlog".into(),
        ));
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powerlog_paths_are_recognised_whatever_the_case() {
        assert!(is_powerlog(
            "sysdiagnose_2026.12.01_10-00-00+0000_iPhone-OS_iPhone_21A/logs/powerlogs/powerlog_2026-12-01_09-00_0A1B2C3D.PLSQL"
        ));
        assert!(is_powerlog("x/logs/powerlogs/powerlog_2026-12-01_09-00_0A1B2C3D.PLSQL.gz"));
        assert!(is_powerlog("x/Logs/PowerLogs/log_1.plsql"));
        assert!(!is_powerlog("x/logs/powerlogs/powerlog.PLSQL-wal"));
        assert!(!is_powerlog("x/logs/other/powerlog.PLSQL"));
    }

    #[test]
    fn what_is_not_a_gzipped_tar_is_refused() {
        let e = powerlogs(&b"plain text"[..]).unwrap_err().to_string();
        assert!(e.contains("not a gzipped tar archive") || e.contains("truncated or corrupt"), "{e}");
    }
}
