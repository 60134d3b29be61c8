//! Files a config refers to: resolved against the config file's folder, checked and hashed.

use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::Field;

/// The folder relative paths in `source` are resolved against (`""` for a bare file name,
/// which then means the current directory).
pub(crate) fn base_dir(source: &Path) -> PathBuf {
    source.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// An absolute form of `path` (lexically, against the current directory); unchanged
/// if the current directory cannot be read.
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Hex sha256 of a file's bytes, read in chunks.
pub(crate) fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

fn where_relative(base: &Path) -> String {
    if base.as_os_str().is_empty() { "the current folder".to_string() } else { format!("{}/", base.display()) }
}

/// Reads a path value that must name an existing file; returns its absolute path and
/// sha256. `what` names it in messages ("build file", "config file").
pub(crate) fn existing_file(f: &Field, p: &mut Problems, base: &Path, what: &str) -> Option<(PathBuf, String)> {
    let written = f.text(p)?;
    existing_file_at(p, f.span(), &f.path, &written, base, what)
}

/// `existing_file` for a path written at `span` under `key` (an element of a list).
pub(crate) fn existing_file_at(
    p: &mut Problems,
    span: Option<Range<usize>>,
    key: &str,
    written: &str,
    base: &Path,
    what: &str,
) -> Option<(PathBuf, String)> {
    let problem = |p: &mut Problems, message: String, fix: &str| p.push(span.clone(), key, message, fix);
    let resolved = base.join(written);
    let shown = resolved.display().to_string();
    let rel = where_relative(base);
    match std::fs::metadata(&resolved) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            problem(
                p,
                format!("missing {what} {shown}"),
                &format!(
                    "build or copy the file there, or correct the path (relative paths are resolved against {rel})"
                ),
            );
            None
        }
        Err(e) => {
            problem(p, format!("cannot read {what} {shown}: {e}"), "check the file's permissions");
            None
        }
        Ok(m) if !m.is_file() => {
            problem(p, format!("{what} {shown} is not a file"), "point to a file, not a folder");
            None
        }
        Ok(_) => match sha256_file(&resolved) {
            Ok(sha) => Some((absolute(&resolved), sha)),
            Err(e) => {
                problem(p, format!("cannot read {what} {shown}: {e}"), "check the file's permissions");
                None
            }
        },
    }
}

/// Reads a path value that must name an existing folder; returns its absolute path.
pub(crate) fn existing_dir(f: &Field, p: &mut Problems, base: &Path) -> Option<PathBuf> {
    let written = f.text(p)?;
    let resolved = base.join(&written);
    if resolved.is_dir() {
        return Some(absolute(&resolved));
    }
    let rel = where_relative(base);
    f.problem(
        p,
        format!("folder {} does not exist", resolved.display()),
        format!("create it or correct the path (relative paths are resolved against {rel})"),
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_a_file_like_sha256_hex() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin");
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(sha256_file(&path).unwrap(), crate::seed::sha256_hex(&bytes));
    }

    #[test]
    fn base_dir_of_bare_and_nested_names() {
        assert_eq!(base_dir(Path::new("lab.toml")), PathBuf::new());
        assert_eq!(base_dir(Path::new("runbooks/q.toml")), PathBuf::from("runbooks"));
    }
}
