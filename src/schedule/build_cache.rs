//! `BuildCache`: a copy of every phone build a scheduled campaign ran, under
//! `artifacts/_builds/<build sha256>/<file name>` (the hash the campaign stores for the
//! build: the `.ipa`'s, or an Android build's over all its APKs). A nightly overwrites its `.ipa` or APK at the
//! same path every day; a confirmation weeks later still needs the baseline build, and
//! finds it here by the hash the campaign stored. (`_` never starts a campaign id, so
//! the folder cannot meet one.)

use std::path::{Path, PathBuf};

use crate::config::Runbook;

pub const CACHE_DIR: &str = "_builds";

#[derive(Debug, Clone)]
pub struct BuildCache {
    dir: PathBuf,
}

impl BuildCache {
    pub fn new(artifacts_dir: &Path) -> Self {
        BuildCache { dir: artifacts_dir.join(CACHE_DIR) }
    }

    /// Keeps every iOS and Android artifact of the runbook: copied (a hard link would
    /// change with a nightly written over the file in place), then renamed into place so
    /// a crash leaves no half file. A file already kept under its hash is left as it is.
    pub fn keep(&self, runbook: &Runbook) -> std::io::Result<()> {
        for b in &runbook.builds {
            if let Some(a) = &b.ios {
                self.keep_file(&a.ipa, &a.sha256, &a.sha256)?;
            }
            if let Some(a) = &b.android {
                for apk in &a.apks {
                    self.keep_file(&apk.path, &apk.sha256, &a.sha256)?;
                }
            }
        }
        Ok(())
    }

    fn keep_file(&self, path: &Path, sha256: &str, build_sha256: &str) -> std::io::Result<()> {
        let Some(name) = path.file_name() else { return Ok(()) };
        let dir = self.dir.join(build_sha256);
        let dest = dir.join(name);
        if dest.is_file() {
            return Ok(());
        }
        std::fs::create_dir_all(&dir)?;
        // The file may have changed since the runbook was read: keep it only when its
        // bytes still are the build the campaign records.
        let bytes = std::fs::read(path)?;
        if crate::seed::sha256_hex(&bytes) != sha256 {
            return Ok(());
        }
        let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
        std::fs::write(&tmp, &bytes)?;
        std::fs::rename(&tmp, &dest)
    }

    /// The kept file of that build hash and file name, if there is one.
    pub fn path(&self, build_sha256: &str, file_name: &str) -> Option<PathBuf> {
        let p = self.dir.join(build_sha256).join(file_name);
        p.is_file().then_some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_build_survives_the_nightly_overwriting_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let ipa = dir.path().join("App.ipa");
        std::fs::write(&ipa, b"build one").unwrap();
        let sha = crate::seed::sha256_hex(b"build one");
        let cache = BuildCache::new(&dir.path().join("artifacts"));
        cache.keep_file(&ipa, &sha, &sha).unwrap();
        // Written over in place, as `cp` does.
        std::fs::write(&ipa, b"build two").unwrap();
        let kept = cache.path(&sha, "App.ipa").unwrap();
        assert_eq!(std::fs::read(kept).unwrap(), b"build one");
        // A file whose bytes are no longer the recorded build is not kept under that hash.
        let stale = crate::seed::sha256_hex(b"build three");
        cache.keep_file(&ipa, &stale, &stale).unwrap();
        assert!(cache.path(&stale, "App.ipa").is_none());
        assert!(cache.path(&sha, "Other.ipa").is_none());
    }
}
