//! Opening a raw file under the artifacts folder in one step, so that nothing can be
//! swapped in between a check and the open: `openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS` relative to the folder's descriptor (the kernel refuses any link
//! and any way out while it resolves), or, on kernels before 5.6 (`ENOSYS`), a walk that
//! opens each component with `O_NOFOLLOW` relative to the one before. What is opened is
//! then checked on its descriptor (a regular file), never again by its path.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat, openat2};
use nix::sys::stat::{Mode, SFlag, fstatat};

/// Why a raw file was not opened.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RawFileError {
    #[error("`{0}` is not a path inside the artifacts folder")]
    NotInside(String),
    #[error("`{0}` leads through a link; lab serve follows none under the artifacts folder")]
    Link(String),
    #[error("no file {0}")]
    Missing(String),
    #[error("{0} is not a file")]
    NotAFile(String),
    #[error("the artifacts folder {folder}: {errno}; fix: check that it exists and lab serve's user may read it")]
    Folder { folder: String, errno: Errno },
    #[error("opening {path}: {errno}")]
    Open { path: String, errno: Errno },
}

/// How a path is resolved: the kernel's `openat2`, or the walk where it is missing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Resolver {
    Openat2,
    /// Chosen by the kernel's `ENOSYS` in use; by name only in tests, which run both.
    #[cfg_attr(not(test), expect(dead_code, reason = "named only by the tests, which run both"))]
    Walk,
}

/// Opens `rel` (relative, `Normal` components only) under `root` for reading, following
/// no link on the way (`root` itself may be one: it is the lab's own setting). A FIFO or
/// device is opened without blocking and then refused as not a file.
pub fn open_beneath(root: &Path, rel: &str) -> Result<File, RawFileError> {
    open_with(root, rel, Resolver::Openat2)
}

pub(super) fn open_with(root: &Path, rel: &str, resolver: Resolver) -> Result<File, RawFileError> {
    let shown = || rel.escape_default().to_string();
    let path = Path::new(rel);
    if rel.is_empty() || path.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(RawFileError::NotInside(shown()));
    }
    let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let folder = openat(nix::fcntl::AT_FDCWD, root, dir_flags, Mode::empty())
        .map_err(|errno| RawFileError::Folder { folder: root.display().to_string(), errno })?;
    let file_flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK;
    let opened = match resolver {
        Resolver::Openat2 => {
            let how = OpenHow::new()
                .flags(file_flags)
                .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
            match openat2(folder.as_fd(), path, how) {
                Err(Errno::ENOSYS) => walk(folder, path, file_flags),
                other => other,
            }
        }
        Resolver::Walk => walk(folder, path, file_flags),
    };
    let fd = opened.map_err(|errno| match errno {
        // A link on the way (NO_SYMLINKS, O_NOFOLLOW) or a way out (BENEATH).
        Errno::ELOOP | Errno::EXDEV => RawFileError::Link(shown()),
        Errno::ENOENT | Errno::ENOTDIR => RawFileError::Missing(shown()),
        errno => RawFileError::Open { path: shown(), errno },
    })?;
    let file = File::from(fd);
    match file.metadata() {
        Ok(m) if m.is_file() => Ok(file),
        _ => Err(RawFileError::NotAFile(shown())),
    }
}

/// The walk for kernels without `openat2`: each directory opened with `O_NOFOLLOW`
/// relative to its parent's descriptor, so a link anywhere on the way is refused (`ELOOP`).
fn walk(folder: OwnedFd, path: &Path, file_flags: OFlag) -> Result<OwnedFd, Errno> {
    let parts: Vec<_> = path.components().collect();
    let Some((last, dirs)) = parts.split_last() else { return Err(Errno::ENOENT) };
    let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut at = folder;
    for dir in dirs {
        at = match openat(at.as_fd(), dir.as_os_str(), dir_flags, Mode::empty()) {
            // `O_DIRECTORY | O_NOFOLLOW` on a link says ENOTDIR: say it was a link, as openat2 does.
            Err(Errno::ENOTDIR) => {
                let st = fstatat(at.as_fd(), dir.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
                let link = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK;
                return Err(if link { Errno::ELOOP } else { Errno::ENOTDIR });
            }
            other => other?,
        };
    }
    openat(at.as_fd(), last.as_os_str(), file_flags, Mode::empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn both_resolvers_open_files_beneath_and_refuse_links_and_ways_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("artifacts");
        std::fs::create_dir_all(root.join("c1/logs")).unwrap();
        std::fs::write(root.join("c1/logs/t1.txt"), "trial").unwrap();
        std::fs::write(root.join("c1/inside.txt"), "inside").unwrap();
        std::fs::write(dir.path().join("secret"), "secret").unwrap();
        let link = |to: &Path, at: &str| std::os::unix::fs::symlink(to, root.join(at)).unwrap();
        link(&dir.path().join("secret"), "c1/out");
        link(Path::new("inside.txt"), "c1/in");
        link(&root.join("c1/logs"), "c1/dirlink");
        link(dir.path(), "c1/up");
        std::os::unix::net::UnixListener::bind(root.join("c1/sock")).unwrap();
        nix::unistd::mkfifo(&root.join("c1/fifo"), Mode::S_IRWXU).unwrap();
        for resolver in [Resolver::Openat2, Resolver::Walk] {
            let mut text = String::new();
            open_with(&root, "c1/logs/t1.txt", resolver).unwrap().read_to_string(&mut text).unwrap();
            assert_eq!(text, "trial", "{resolver:?}");
            let refused = |rel: &str| open_with(&root, rel, resolver).unwrap_err();
            // Every link is refused, even one that stays inside: nothing is resolved twice.
            for rel in ["c1/out", "c1/in", "c1/dirlink/t1.txt", "c1/up/secret"] {
                assert_eq!(refused(rel), RawFileError::Link(rel.into()), "{resolver:?} {rel}");
            }
            for rel in ["../secret", "c1/../../secret", "/etc/passwd", "./c1/inside.txt", ""] {
                assert_eq!(refused(rel), RawFileError::NotInside(rel.into()), "{resolver:?} {rel}");
            }
            assert_eq!(refused("c1/nothing"), RawFileError::Missing("c1/nothing".into()));
            assert_eq!(refused("c1/inside.txt/x"), RawFileError::Missing("c1/inside.txt/x".into()));
            // A FIFO would block an open for reading: it is opened without waiting, and refused.
            for rel in ["c1/logs", "c1/fifo", "c1/sock"] {
                assert!(
                    matches!(refused(rel), RawFileError::NotAFile(_) | RawFileError::Open { .. }),
                    "{resolver:?} {rel}"
                );
            }
        }
        let gone = open_with(&dir.path().join("none"), "c1/x", Resolver::Openat2).unwrap_err();
        assert!(gone.to_string().contains("fix: check that it exists"), "{gone}");
    }
}
