//! `RawFiles`: where a lab's raw files are, one interface for every reader and writer
//! (`lab run`'s uploads, `lab artifacts sync`, `lab serve`'s downloads, `lab rerun`'s
//! manifest, `lab import --attach`): a folder, or a bucket with a local folder in front.
//! A file is read from the bucket once the store says its upload is confirmed, else from
//! the local folder (where it stays until then).

use std::path::{Path, PathBuf};

use futures_util::StreamExt;

use super::bucket::{Bucket, Chunks};
use super::raw_file_row::RawFileRow;
use super::raw_files_error::RawFilesError;
use super::transfer::{blocking, files_under, rows_for, upload_confirmed};
use crate::config::Lab;
use crate::store::Store;

#[derive(Debug, Clone)]
pub enum RawFiles {
    /// `[lab] artifacts` is a folder: files are there and nowhere else.
    Folder(PathBuf),
    /// `[lab] artifacts = "s3://…"`: written to `local` first, then kept in `bucket`.
    Bucket { local: PathBuf, bucket: Bucket, keep_local: bool },
}

/// Where one file is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// `<campaign>/<path>` under the local folder.
    Local(PathBuf),
    /// An object of the lab's bucket.
    Object { key: String, size: u64 },
}

impl RawFiles {
    /// The lab's place for raw files; a bucket's client is made, not asked anything yet.
    pub fn of_lab(lab: &Lab) -> Result<RawFiles, RawFilesError> {
        Ok(match &lab.object_store {
            None => RawFiles::Folder(lab.artifacts_dir.clone()),
            Some(s) => RawFiles::Bucket {
                local: lab.artifacts_dir.clone(),
                bucket: Bucket::open(s)?,
                keep_local: s.keep_local,
            },
        })
    }

    /// The local folder trials write to.
    pub fn local(&self) -> &Path {
        match self {
            RawFiles::Folder(dir) | RawFiles::Bucket { local: dir, .. } => dir,
        }
    }

    pub fn bucket(&self) -> Option<&Bucket> {
        match self {
            RawFiles::Folder(_) => None,
            RawFiles::Bucket { bucket, .. } => Some(bucket),
        }
    }

    /// Where `campaign`'s file `path` is read from: the bucket when the store has its
    /// upload confirmed, else the local folder. A file confirmed in a bucket that is not
    /// this lab's is an error, not a silent miss.
    pub async fn place(&self, store: &Store, campaign: &str, path: &str) -> Result<Place, RawFilesError> {
        let (s, c, p) = (store.clone(), campaign.to_string(), path.to_string());
        let row = blocking(move || s.raw_file(&c, &p)).await?;
        let local = || Place::Local(Path::new(campaign).join(path));
        match row {
            Some(r) if r.confirmed_at.is_some() => match self.bucket() {
                Some(b) if b.place() == r.bucket => Ok(Place::Object { key: r.key, size: r.size }),
                // Still here (kept, or this machine ran it): as good as the object.
                _ if self.local().join(campaign).join(path).is_file() => Ok(local()),
                ours => Err(RawFilesError::OtherBucket {
                    theirs: r.bucket,
                    ours: ours.map_or_else(|| format!("the folder {}", self.local().display()), |b| b.place().into()),
                }),
            },
            _ => Ok(local()),
        }
    }

    /// Puts every file under the local folder's `<campaign>/<sub>` in place: with a bucket,
    /// each is recorded pending, uploaded, read back and confirmed in turn (the first
    /// failure stops it; what is left stays pending). A folder holds them already. The
    /// files and bytes uploaded.
    pub async fn put(&self, store: &Store, campaign: &str, sub: &str) -> Result<(usize, u64), RawFilesError> {
        let RawFiles::Bucket { local, bucket, keep_local } = self else {
            return Ok((0, 0));
        };
        let rows = self.add(store, campaign, sub).await?;
        let mut bytes = 0;
        for row in &rows {
            bytes += upload_confirmed(bucket, store, row, local, *keep_local).await?;
        }
        Ok((rows.len(), bytes))
    }

    /// Records, pending, every file under `<campaign>/<sub>` (`sub` empty: the campaign's
    /// own files beside the attempts' folders are not included; name them) and returns the
    /// rows. Nothing for a folder.
    pub async fn add(&self, store: &Store, campaign: &str, sub: &str) -> Result<Vec<RawFileRow>, RawFilesError> {
        let RawFiles::Bucket { local, bucket, .. } = self else {
            return Ok(Vec::new());
        };
        let (bucket, campaign, dir, sub) =
            (bucket.clone(), campaign.to_string(), local.join(campaign), sub.to_string());
        let s = store.clone();
        let rows = tokio::task::spawn_blocking(move || {
            let under = dir.join(&sub);
            let paths: Vec<String> = if under.is_file() {
                vec![sub]
            } else {
                let listed = files_under(&under).map_err(|source| RawFilesError::Local { path: under, source })?;
                listed.into_iter().map(|p| format!("{sub}/{p}")).collect()
            };
            let rows = rows_for(&bucket, &campaign, &dir, &paths)?;
            s.add_raw_files(&rows)?;
            Ok::<_, RawFilesError>(rows)
        })
        .await
        .map_err(|e| RawFilesError::Client(format!("hashing raw files stopped: {e}")))??;
        Ok(rows)
    }

    /// The file, as it arrives, from where [`RawFiles::place`] says it is.
    pub async fn get(&self, store: &Store, campaign: &str, path: &str) -> Result<Chunks, RawFilesError> {
        match self.place(store, campaign, path).await? {
            Place::Object { key, .. } => self.bucket().expect("an object is in this lab's bucket").get(&key).await,
            Place::Local(rel) => {
                let file = self.local().join(rel);
                let bytes =
                    tokio::fs::read(&file).await.map_err(|source| RawFilesError::Local { path: file, source })?;
                Ok(futures_util::stream::once(async move { Ok(hyper::body::Bytes::from(bytes)) }).boxed())
            }
        }
    }

    /// The whole file, from where [`RawFiles::place`] says it is.
    pub async fn read(&self, store: &Store, campaign: &str, path: &str) -> Result<Vec<u8>, RawFilesError> {
        let mut chunks = self.get(store, campaign, path).await?;
        let mut out = Vec::new();
        while let Some(c) = chunks.next().await {
            out.extend_from_slice(&c?);
        }
        Ok(out)
    }

    /// The file's size where it is read from, or `None` when it is nowhere.
    pub async fn head(&self, store: &Store, campaign: &str, path: &str) -> Result<Option<u64>, RawFilesError> {
        match self.place(store, campaign, path).await? {
            Place::Object { key, .. } => self.bucket().expect("an object is in this lab's bucket").head(&key).await,
            Place::Local(rel) => {
                Ok(std::fs::metadata(self.local().join(rel)).ok().filter(|m| m.is_file()).map(|m| m.len()))
            }
        }
    }

    /// A campaign's files and their sizes, by path: the store's rows with a bucket, the
    /// folder's files without one.
    pub async fn list(&self, store: &Store, campaign: &str) -> Result<Vec<(String, u64)>, RawFilesError> {
        match self {
            RawFiles::Bucket { .. } => {
                let (s, c) = (store.clone(), campaign.to_string());
                let rows = blocking(move || s.raw_files(&c)).await?;
                Ok(rows.into_iter().map(|r| (r.path, r.size)).collect())
            }
            RawFiles::Folder(dir) => {
                let dir = dir.join(campaign);
                let paths = files_under(&dir).map_err(|source| RawFilesError::Local { path: dir.clone(), source })?;
                Ok(paths
                    .into_iter()
                    .map(|p| (p.clone(), std::fs::metadata(dir.join(&p)).map_or(0, |m| m.len())))
                    .collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::RawFileRow;

    fn row(path: &str) -> RawFileRow {
        RawFileRow {
            campaign: "c1".into(),
            path: path.into(),
            bucket: "s3://lab-raw".into(),
            key: format!("runs/c1/{path}"),
            size: 5,
            sha256: "00".into(),
            host: "shelf-1".into(),
            confirmed_at: None,
            tries: 0,
            last_error: None,
        }
    }

    /// A folder's files are read where they lie; a file the store has confirmed in a bucket
    /// is read there, or refused with the bucket's name when the lab has another place and
    /// no copy.
    #[tokio::test]
    async fn a_folder_reads_its_files_and_names_the_bucket_of_a_file_it_has_not() {
        let (dir, store) = crate::testing::postgres::sqlite_store();
        let root = dir.path().join("artifacts");
        std::fs::create_dir_all(root.join("c1/t0.attempt-0")).unwrap();
        std::fs::write(root.join("c1/t0.attempt-0/log.txt"), b"hello").unwrap();
        std::fs::write(root.join("c1/manifest.json"), b"{}").unwrap();
        let raw = RawFiles::Folder(root.clone());
        assert!(raw.bucket().is_none() && raw.local() == root);
        assert_eq!(raw.read(&store, "c1", "t0.attempt-0/log.txt").await.unwrap(), b"hello");
        assert_eq!(raw.head(&store, "c1", "t0.attempt-0/log.txt").await.unwrap(), Some(5));
        assert_eq!(raw.head(&store, "c1", "nothing").await.unwrap(), None);
        let listed = raw.list(&store, "c1").await.unwrap();
        assert_eq!(listed, [("manifest.json".to_string(), 2), ("t0.attempt-0/log.txt".to_string(), 5)]);
        assert_eq!(raw.put(&store, "c1", "t0.attempt-0").await.unwrap(), (0, 0), "a folder holds them already");
        assert!(raw.add(&store, "c1", "t0.attempt-0").await.unwrap().is_empty());

        // Confirmed in a bucket, still here: read here. Confirmed and not here: its bucket named.
        store.add_raw_files(&[row("t0.attempt-0/log.txt"), row("t1.attempt-0/gone.txt")]).unwrap();
        for r in ["t0.attempt-0/log.txt", "t1.attempt-0/gone.txt"] {
            assert!(store.confirm_raw_file("c1", r, "00", "t1").unwrap());
        }
        assert_eq!(
            raw.place(&store, "c1", "t0.attempt-0/log.txt").await.unwrap(),
            Place::Local("c1/t0.attempt-0/log.txt".into())
        );
        let e = raw.read(&store, "c1", "t1.attempt-0/gone.txt").await.unwrap_err().to_string();
        assert!(
            e.starts_with("the campaign's files are in s3://lab-raw, and this lab's artifacts are the folder"),
            "{e}"
        );
    }
}
