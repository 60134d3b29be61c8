//! A lab's bucket (`[lab] artifacts = "s3://…"`) through Apache Arrow's `object_store`: its
//! S3 client signs, retries (briefly: the lab's uploader has its own backoff) and uploads
//! large files in parts. Keys are `<prefix>/<campaign>/<path>`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::command_credentials::CommandCredentials;
use super::raw_files_error::RawFilesError;
use crate::config::ObjectStoreSettings;

/// Parts of a large upload (object_store's `BufWriter` puts a smaller file in one request).
const PART: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct Bucket {
    store: Arc<dyn ObjectStore>,
    /// `s3://BUCKET`, as the store's rows name it.
    place: String,
    prefix: String,
}

/// A whole object or file, as a stream of chunks.
/// (`bytes::Bytes`, named through hyper, which re-exports it: no crate of its own for a name.)
pub type Chunks = futures_util::stream::BoxStream<'static, Result<hyper::body::Bytes, RawFilesError>>;

impl Bucket {
    /// The client for `s`: credentials from `credentials_command`, else the environment.
    /// Nothing is asked of the server yet.
    pub fn open(s: &ObjectStoreSettings) -> Result<Bucket, RawFilesError> {
        // reqwest's TLS (rustls) uses the process's provider: ring, as the rest of the lab
        // (already installed by another part of it is as good).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut b = AmazonS3Builder::from_env()
            .with_bucket_name(&s.bucket)
            .with_virtual_hosted_style_request(false)
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(100),
                    max_backoff: Duration::from_secs(2),
                    base: 2.0,
                },
                max_retries: 2,
                retry_timeout: Duration::from_secs(15),
            })
            .with_client_options(
                ClientOptions::new()
                    .with_connect_timeout(Duration::from_secs(5))
                    .with_timeout(Duration::from_secs(600))
                    .with_allow_http(s.allow_http),
            );
        if let Some(region) = &s.region {
            b = b.with_region(region);
        }
        if let Some(endpoint) = &s.endpoint {
            b = b.with_endpoint(endpoint);
        }
        if s.allow_http {
            b = b.with_allow_http(true);
        }
        if !s.credentials_command.is_empty() {
            b = b.with_credentials(Arc::new(CommandCredentials::new(s.credentials_command.clone())));
        }
        let store = b.build().map_err(|e| RawFilesError::Client(e.to_string()))?;
        Ok(Bucket { store: Arc::new(store), place: format!("s3://{}", s.bucket), prefix: s.prefix.clone() })
    }

    /// `s3://BUCKET`.
    pub fn place(&self) -> &str {
        &self.place
    }

    /// The object key of a campaign's file.
    pub fn key(&self, campaign: &str, path: &str) -> String {
        if self.prefix.is_empty() { format!("{campaign}/{path}") } else { format!("{}/{campaign}/{path}", self.prefix) }
    }

    fn err(&self, e: object_store::Error) -> RawFilesError {
        RawFilesError::of(&self.place, e)
    }

    /// Uploads the file at `local` to `key`, streaming it (in parts when it is large).
    pub async fn put_file(&self, key: &str, local: &Path) -> Result<(), RawFilesError> {
        let local_err = |source| RawFilesError::Local { path: local.to_path_buf(), source };
        let mut file = tokio::fs::File::open(local).await.map_err(local_err)?;
        let mut w = object_store::buffered::BufWriter::with_capacity(self.store.clone(), Key::from(key), PART);
        if let Err(e) = tokio::io::copy(&mut file, &mut w).await {
            let _ = w.abort().await;
            return Err(self.io_err(e));
        }
        w.shutdown().await.map_err(|e| self.io_err(e))
    }

    /// A write error of `BufWriter`: the object store's, or the file's.
    fn io_err(&self, e: std::io::Error) -> RawFilesError {
        match e.into_inner().map(|inner| inner.downcast::<object_store::Error>()) {
            Some(Ok(os)) => self.err(*os),
            Some(Err(other)) => RawFilesError::Unreachable { place: self.place.clone(), detail: other.to_string() },
            None => RawFilesError::Unreachable { place: self.place.clone(), detail: "the upload failed".into() },
        }
    }

    /// The object at `key`, as it arrives.
    pub async fn get(&self, key: &str) -> Result<Chunks, RawFilesError> {
        let got = self.store.get(&Key::from(key)).await.map_err(|e| self.err(e))?;
        let place = self.place.clone();
        Ok(got.into_stream().map(move |c| c.map_err(|e| RawFilesError::of(&place, e))).boxed())
    }

    /// The object's size, or `None` when there is none.
    pub async fn head(&self, key: &str) -> Result<Option<u64>, RawFilesError> {
        match self.store.head(&Key::from(key)).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err(e)),
        }
    }

    /// Every object under `prefix` (a folder's key, without the trailing `/`), with its size.
    pub async fn list(&self, prefix: &str) -> Result<Vec<(String, u64)>, RawFilesError> {
        let mut out = Vec::new();
        let mut objects = self.store.list(Some(&Key::from(prefix)));
        while let Some(meta) = objects.next().await {
            let meta = meta.map_err(|e| self.err(e))?;
            out.push((meta.location.to_string(), meta.size));
        }
        out.sort();
        Ok(out)
    }

    /// Reads the object at `key` back whole: its size and SHA-256 (hex), from its bytes.
    pub async fn read_back(&self, key: &str) -> Result<(u64, String), RawFilesError> {
        let mut chunks = self.get(key).await?;
        let (mut size, mut hash) = (0u64, Sha256::new());
        while let Some(c) = chunks.next().await {
            let c = c?;
            size += c.len() as u64;
            hash.update(&c);
        }
        Ok((size, hex::encode(hash.finalize())))
    }
}
