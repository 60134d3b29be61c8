//! `RawFilesError`: why a raw file could not be put in, read from or confirmed in its place.
//! Never holds a credential.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RawFilesError {
    /// The object store did not answer, or answered with a server error after retries:
    /// the files stay local and pending.
    #[error(
        "the object store {place} cannot be reached: {detail}; fix: check `[lab.object_store] endpoint` and the network (files stay local and pending; `lab artifacts sync` uploads them)"
    )]
    Unreachable { place: String, detail: String },
    #[error(
        "the object store {place} refused the request: {detail}; fix: check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or `[lab.object_store] credentials_command`) and the bucket's permissions"
    )]
    Denied { place: String, detail: String },
    #[error("no object `{key}` in {place}")]
    Missing { place: String, key: String },
    /// What was read back is not what was uploaded.
    #[error(
        "{key} in {place}: read back {got_size} bytes with SHA-256 {got}, not the {size} bytes with SHA-256 {sha256} uploaded; the local copy stays"
    )]
    Mismatch { place: String, key: String, size: u64, sha256: String, got_size: u64, got: String },
    #[error("the object store's client: {0}; fix: check [lab.object_store] in the lab file")]
    Client(String),
    /// `detail` never repeats what the command printed on its standard output.
    #[error("the credentials command `{program}`: {detail}; fix: check `[lab.object_store] credentials_command`")]
    Credentials { program: String, detail: String },
    #[error("{}: {source}; fix: check that the file is there and readable", path.display())]
    Local { path: PathBuf, source: std::io::Error },
    #[error(
        "the campaign's files are in {theirs}, and this lab's artifacts are {ours}; fix: point `[lab] artifacts` at {theirs}"
    )]
    OtherBucket { theirs: String, ours: String },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl RawFilesError {
    /// Whether the object store was not there (exit 3, try again later), not refusing.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, RawFilesError::Unreachable { .. })
    }

    /// `e` from the object store at `place`, sorted by what the lab does about it.
    pub(crate) fn of(place: &str, e: object_store::Error) -> RawFilesError {
        let place = place.to_string();
        match e {
            object_store::Error::NotFound { path, .. } => RawFilesError::Missing { place, key: path },
            object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
                RawFilesError::Denied { place, detail: one_line(&e) }
            }
            e @ (object_store::Error::InvalidPath { .. } | object_store::Error::UnknownConfigurationKey { .. }) => {
                RawFilesError::Client(one_line(&e))
            }
            e => RawFilesError::Unreachable { place, detail: one_line(&e) },
        }
    }
}

/// An error and its sources on one line.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text.replace('\n', " ")
}
