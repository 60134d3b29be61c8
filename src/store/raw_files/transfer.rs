//! Moving a raw file from the local folder into the bucket, and what counts as done: the
//! object read back whole has the size and SHA-256 the store holds for the file. Only then
//! is its row confirmed, and only then may its local copy go.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::bucket::Bucket;
use super::raw_file_row::RawFileRow;
use super::raw_files_error::RawFilesError;
use crate::store::Store;

/// A campaign's own file beside its attempts' folders; never deleted locally (a resumed
/// campaign reads what it observed from it).
pub const MANIFEST: &str = "manifest.json";

/// Size and SHA-256 (hex) of the file at `path`.
pub fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut f = std::fs::File::open(path)?;
    let (mut hash, mut size, mut buf) = (Sha256::new(), 0u64, vec![0u8; 256 * 1024]);
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok((size, hex::encode(hash.finalize())));
        }
        size += n as u64;
        hash.update(&buf[..n]);
    }
}

/// Every file under `dir`, as paths relative to `dir` with `/` between parts, sorted. No
/// link is followed (raw files are regular files the lab wrote).
pub fn files_under(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        for entry in std::fs::read_dir(dir.join(&rel))? {
            let entry = entry?;
            let kind = entry.file_type()?;
            let name = rel.join(entry.file_name());
            if kind.is_dir() {
                todo.push(name);
            } else if kind.is_file() {
                out.push(name.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Rows, pending, for the files `paths` (relative to `campaign_dir`) of `campaign`, held on
/// this machine.
pub fn rows_for(
    bucket: &Bucket,
    campaign: &str,
    campaign_dir: &Path,
    paths: &[String],
) -> Result<Vec<RawFileRow>, RawFilesError> {
    let host = crate::store::this_host();
    paths
        .iter()
        .map(|path| {
            let local = campaign_dir.join(path);
            let (size, sha256) = hash_file(&local).map_err(|source| RawFilesError::Local { path: local, source })?;
            Ok(RawFileRow {
                campaign: campaign.into(),
                path: path.clone(),
                bucket: bucket.place().into(),
                key: bucket.key(campaign, path),
                size,
                sha256,
                host: host.clone(),
                confirmed_at: None,
                tries: 0,
                last_error: None,
            })
        })
        .collect()
}

/// Uploads `row`'s file from under `root` (the lab's local folder), reads it back, and
/// confirms its row when size and SHA-256 agree; then deletes the local copy unless
/// `keep_local` (never the manifest). The bytes uploaded.
pub async fn upload_confirmed(
    bucket: &Bucket,
    store: &Store,
    row: &RawFileRow,
    root: &Path,
    keep_local: bool,
) -> Result<u64, RawFilesError> {
    let local = root.join(&row.campaign).join(&row.path);
    bucket.put_file(&row.key, &local).await?;
    let (got_size, got) = bucket.read_back(&row.key).await?;
    if got_size != row.size || got != row.sha256 {
        return Err(RawFilesError::Mismatch {
            place: bucket.place().into(),
            key: row.key.clone(),
            size: row.size,
            sha256: row.sha256.clone(),
            got_size,
            got,
        });
    }
    let (s, r, at) =
        (store.clone(), row.clone(), chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    let confirmed = blocking(move || s.confirm_raw_file(&r.campaign, &r.path, &r.sha256, &at)).await?;
    // Not confirmed: the file was rewritten since (its new row is pending); its copy stays.
    if confirmed && !keep_local && row.path != MANIFEST {
        let _ = std::fs::remove_file(&local);
        if let Some(dir) = local.parent() {
            // The attempt's folder, once its last file is gone (fails while any is left).
            let _ = std::fs::remove_dir(dir);
        }
    }
    Ok(row.size)
}

/// Records a failed upload of `row` (best effort: the row stays pending either way).
pub async fn note_failure(store: &Store, row: &RawFileRow, e: &RawFilesError) {
    let (s, r, why) = (store.clone(), row.clone(), e.to_string());
    let _ = blocking(move || s.raw_file_failed(&r.campaign, &r.path, &why)).await;
}

/// A store call off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::store::StoreError> + Send + 'static,
) -> Result<T, RawFilesError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => Ok(r?),
        Err(e) => Err(RawFilesError::Store(crate::store::StoreError::Internal(format!("a store call panicked: {e}")))),
    }
}
