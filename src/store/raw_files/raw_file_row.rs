//! `raw_files`: each raw file of a campaign whose lab keeps them in a bucket, with its
//! object key, size and SHA-256, the machine that holds its local copy, and whether its
//! upload is confirmed. A pending row is a promise that the local copy stays.

use crate::store::backend::{Columns, DbError, FromRow, Row, read_all, vals};
use crate::store::{Store, StoreError};

/// One raw file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFileRow {
    pub campaign: String,
    /// Relative to the campaign's folder: `<trial key>.attempt-<n>/<file>`, `manifest.json`.
    pub path: String,
    /// `s3://BUCKET`.
    pub bucket: String,
    /// The object's key in the bucket (the lab's prefix, the campaign, `path`).
    pub key: String,
    pub size: u64,
    /// Lowercase hex.
    pub sha256: String,
    /// The machine whose local folder holds the file until its upload is confirmed.
    pub host: String,
    /// RFC 3339 UTC, when the object read back had this size and SHA-256; `None`: pending.
    pub confirmed_at: Option<String>,
    /// Uploads tried and failed.
    pub tries: u32,
    pub last_error: Option<String>,
}

const COLUMNS: &str = "campaign, path, bucket, key, size, sha256, host, confirmed_at, tries, last_error";

impl FromRow<'_> for RawFileRow {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(RawFileRow {
            campaign: c.get()?,
            path: c.get()?,
            bucket: c.get()?,
            key: c.get()?,
            size: u64::try_from(c.get::<i64>()?).map_err(|_| DbError::Type("a negative raw file size".into()))?,
            sha256: c.get()?,
            host: c.get()?,
            confirmed_at: c.get()?,
            tries: c.get()?,
            last_error: c.get()?,
        })
    }
}

impl Store {
    /// Adds files, pending. A file there already with the same size and SHA-256 keeps its
    /// state (confirmed stays confirmed); one that changed (a rewritten manifest) is
    /// pending again.
    pub fn add_raw_files(&self, rows: &[RawFileRow]) -> Result<(), StoreError> {
        let rows: Vec<_> = rows
            .iter()
            .map(|r| vals![&r.campaign, &r.path, &r.bucket, &r.key, r.size as i64, &r.sha256, &r.host])
            .collect();
        self.db.call(move |c| {
            c.transaction(|c| {
                for r in &rows {
                    c.execute(
                        "INSERT INTO raw_files (campaign, path, bucket, key, size, sha256, host)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                         ON CONFLICT (campaign, path) DO UPDATE SET
                             confirmed_at = CASE WHEN raw_files.sha256 = excluded.sha256
                                 AND raw_files.size = excluded.size AND raw_files.key = excluded.key
                                 AND raw_files.bucket = excluded.bucket
                                 THEN raw_files.confirmed_at END,
                             bucket = excluded.bucket, key = excluded.key, size = excluded.size,
                             sha256 = excluded.sha256, host = excluded.host",
                        r,
                    )?;
                }
                Ok(())
            })
        })?;
        Ok(())
    }

    /// Marks a file's upload confirmed, if its row still has this SHA-256 (a file
    /// rewritten since is pending again); whether it did.
    pub fn confirm_raw_file(&self, campaign: &str, path: &str, sha256: &str, at: &str) -> Result<bool, StoreError> {
        let args = vals![campaign, path, sha256, at];
        let n = self.db.call(move |c| {
            c.execute(
                "UPDATE raw_files SET confirmed_at = ?4, last_error = NULL
                 WHERE campaign = ?1 AND path = ?2 AND sha256 = ?3",
                &args,
            )
        })?;
        Ok(n > 0)
    }

    /// Counts a failed upload of a file, with why.
    pub fn raw_file_failed(&self, campaign: &str, path: &str, error: &str) -> Result<(), StoreError> {
        let args = vals![campaign, path, error];
        self.db.call(move |c| {
            c.execute(
                "UPDATE raw_files SET tries = tries + 1, last_error = ?3 WHERE campaign = ?1 AND path = ?2",
                &args,
            )
        })?;
        Ok(())
    }

    /// Files of `bucket` not confirmed yet, every machine's, by campaign and path.
    pub fn pending_raw_files(&self, bucket: &str) -> Result<Vec<RawFileRow>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM raw_files WHERE bucket = ?1 AND confirmed_at IS NULL ORDER BY campaign, path"
        );
        let args = vals![bucket];
        let rows = self.db.call(move |c| c.query(&sql, &args))?;
        Ok(read_all(&rows)?)
    }

    /// A campaign's files, by path.
    pub fn raw_files(&self, campaign: &str) -> Result<Vec<RawFileRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM raw_files WHERE campaign = ?1 ORDER BY path");
        let args = vals![campaign];
        let rows = self.db.call(move |c| c.query(&sql, &args))?;
        Ok(read_all(&rows)?)
    }

    /// One file of a campaign.
    pub fn raw_file(&self, campaign: &str, path: &str) -> Result<Option<RawFileRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM raw_files WHERE campaign = ?1 AND path = ?2");
        let args = vals![campaign, path];
        let row = self.db.call(move |c| c.query_opt(&sql, &args))?;
        Ok(row.as_ref().map(Row::read).transpose()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(campaign: &str, path: &str, sha: &str) -> RawFileRow {
        RawFileRow {
            campaign: campaign.into(),
            path: path.into(),
            bucket: "s3://lab-raw".into(),
            key: format!("p/{campaign}/{path}"),
            size: 3,
            sha256: sha.into(),
            host: "shelf-1".into(),
            confirmed_at: None,
            tries: 0,
            last_error: None,
        }
    }

    crate::testing::postgres::on_both!(a_file_is_pending_until_confirmed_and_pending_again_when_it_changes);

    fn a_file_is_pending_until_confirmed_and_pending_again_when_it_changes(s: &Store) {
        let (a, m) = (row("c1", "t0.attempt-0/log.txt", "aa"), row("c1", "manifest.json", "mm"));
        s.add_raw_files(&[a.clone(), m.clone(), row("c2", "x", "xx")]).unwrap();
        let pending: Vec<String> =
            s.pending_raw_files("s3://lab-raw").unwrap().iter().map(|r| format!("{}/{}", r.campaign, r.path)).collect();
        assert_eq!(pending, ["c1/manifest.json", "c1/t0.attempt-0/log.txt", "c2/x"]);
        assert!(s.pending_raw_files("s3://other").unwrap().is_empty(), "another bucket's files are not ours");

        s.raw_file_failed("c1", &a.path, "connection refused").unwrap();
        let failed = s.raw_file("c1", &a.path).unwrap().unwrap();
        assert_eq!((failed.tries, failed.last_error.as_deref()), (1, Some("connection refused")));

        assert!(!s.confirm_raw_file("c1", &a.path, "stale", "t1").unwrap(), "another file's checksum confirms nothing");
        assert!(s.confirm_raw_file("c1", &a.path, "aa", "t1").unwrap());
        assert!(s.confirm_raw_file("c1", &m.path, "mm", "t1").unwrap());
        let got = s.raw_file("c1", &a.path).unwrap().unwrap();
        assert_eq!(got, RawFileRow { confirmed_at: Some("t1".into()), tries: 1, ..a.clone() }, "round trip");

        // Added again unchanged: still confirmed. Rewritten: pending again.
        s.add_raw_files(&[a.clone(), row("c1", "manifest.json", "m2")]).unwrap();
        let c1 = s.raw_files("c1").unwrap();
        assert_eq!(c1.iter().map(|r| r.confirmed_at.is_some()).collect::<Vec<_>>(), [false, true], "{c1:?}");
        assert_eq!(c1[0].sha256, "m2");
        assert_eq!(s.raw_file("c9", "x").unwrap(), None);
    }
}
