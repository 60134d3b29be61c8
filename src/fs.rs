//! File helpers every layer may use: writing a file so that a reader never sees half of it.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Writes `path` through a temporary file and a rename: a reader never sees half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Like [`write_atomic`], with the content written by `fill` through a buffer.
///
/// Not fsynced: every file written here is derived from the store (the store is what a
/// crash must not lose), and the rename already keeps readers from half a file; after a
/// power loss `lab report` writes them again. Flushing 150 MB of results.csv to disk was
/// most of a large report's time.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut io::BufWriter<fs::File>) -> io::Result<()>,
) -> io::Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("report");
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut w = io::BufWriter::with_capacity(1 << 16, fs::File::create(&tmp)?);
        fill(&mut w)?;
        w.into_inner().map_err(io::IntoInnerError::into_error)?;
        replace(&tmp, path)
    })();
    if let Err(e) = result {
        // Best effort: do not leave the temporary file behind.
        let _ = fs::remove_file(&tmp);
        return Err(with_path(e, "writing", path));
    }
    Ok(())
}

/// Puts the file at `tmp` in place of `path`: readers see the old file or the new one,
/// never none and never half of one.
///
/// Over an existing file the two are exchanged (`renameat2`, `RENAME_EXCHANGE`) and the
/// old one, now at `tmp`, is removed. A plain rename over an existing file makes ext4
/// write the new one out there and then (`auto_da_alloc`): 70–90 ms for the 156 MB
/// results.csv of a million measurements, where exchanging and removing take about
/// 13 ms. That flush guarded against a new file that is empty after a power loss;
/// [`files_current`] checks the files' sizes against the stamp, so such a file is
/// written again. Where there is no old file, or no exchange (another OS, a file system
/// without it), a plain rename.
fn replace(tmp: &Path, path: &Path) -> io::Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
        // Only over a file: a folder in the way stays where it is and fails the rename.
        if fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
            && renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RenameFlags::RENAME_EXCHANGE).is_ok()
        {
            return fs::remove_file(tmp);
        }
    }
    fs::rename(tmp, path)
}

pub(crate) fn with_path(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// `p` as users are shown it: relative to the current folder when it is under it.
pub fn display_path(p: &Path) -> String {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    p.strip_prefix(&cwd).unwrap_or(p).display().to_string()
}
