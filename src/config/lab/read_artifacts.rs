//! `[lab] artifacts` and `[lab.object_store]`: where trials' raw files go, a folder (the
//! default, `artifacts`) or an S3-compatible bucket with a local folder in front of it
//! (docs/artifacts.md).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::ObjectStoreSettings;
use crate::config::syntax::files::absolute;
use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::{Field, Table};

const OBJECT_STORE_KEYS: &[&str] =
    &["endpoint", "region", "allow_http", "credentials_command", "keep_local", "local", "drain_timeout"];

const URL_FIX: &str = "write a folder path such as `artifacts`, or `s3://BUCKET/PREFIX` (MinIO, Ceph, GCS: their S3 API, \
with `[lab.object_store] endpoint`)";

/// The local folder and, for an `s3://` URL, the bucket's settings, from the `[lab]`
/// table `t`. Relative paths are resolved against `base`, the lab file's folder.
pub(crate) fn read_artifacts(t: &Table, p: &mut Problems, base: &Path) -> (PathBuf, Option<ObjectStoreSettings>) {
    let mut local = PathBuf::from("artifacts");
    let mut bucket = None;
    if let Some(f) = t.get("artifacts")
        && let Some(text) = f.text(p)
    {
        match text.split_once("://") {
            None => local = PathBuf::from(text),
            Some(("s3", rest)) => bucket = s3_url(&f, p, rest),
            Some((scheme, _)) => f.problem(
                p,
                format!("`{}://` is not a place for raw files this lab knows", scheme.escape_default()),
                URL_FIX,
            ),
        }
    }
    let table = t.get("object_store").and_then(|f| f.table(p).map(|table| (f, table)));
    let Some((bucket, prefix)) = bucket else {
        if let Some((f, _)) = table {
            f.key_problem(
                p,
                "object_store settings are for a bucket, and `artifacts` is a folder",
                "set `artifacts = \"s3://BUCKET/PREFIX\"` in [lab], or remove [lab.object_store]",
            );
        }
        return (absolute(&base.join(local)), None);
    };
    let mut s = ObjectStoreSettings {
        bucket,
        prefix,
        endpoint: None,
        region: None,
        allow_http: false,
        credentials_command: Vec::new(),
        keep_local: true,
        drain_timeout: Duration::from_secs(60),
    };
    if let Some((_, t)) = table {
        read_object_store(&t, p, base, &mut s, &mut local);
    }
    (absolute(&base.join(local)), Some(s))
}

/// `BUCKET/PREFIX` after `s3://`: the bucket and the prefix without its outer slashes.
fn s3_url(f: &Field, p: &mut Problems, rest: &str) -> Option<(String, String)> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        f.problem(
            p,
            "the URL names no bucket",
            "write `artifacts = \"s3://BUCKET/PREFIX\"`, e.g. `s3://lab-raw/shelf-1`",
        );
        return None;
    }
    // S3's rule for new buckets (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && edge_ok(bucket.chars().next())
        && edge_ok(bucket.chars().last());
    if !bucket_ok {
        f.problem(
            p,
            format!("`{}` is not a bucket name", bucket.escape_default()),
            "a bucket's name has 3 to 63 lowercase letters, digits, `-` and `.`, and starts and ends with a letter or digit",
        );
        return None;
    }
    let parts: Vec<&str> = prefix.split('/').filter(|s| !s.is_empty()).collect();
    if parts.iter().any(|s| *s == "." || *s == ".." || s.chars().any(char::is_control)) {
        f.problem(
            p,
            format!("the prefix `{}` has a `.` or `..` part or a control character", prefix.escape_default()),
            "write the prefix as folder names, e.g. `s3://lab-raw/shelf-1`",
        );
        return None;
    }
    Some((bucket.to_string(), parts.join("/")))
}

fn read_object_store(t: &Table, p: &mut Problems, base: &Path, s: &mut ObjectStoreSettings, local: &mut PathBuf) {
    t.check_keys(p, OBJECT_STORE_KEYS);
    if let Some(b) = t.get("allow_http").and_then(|f| f.bool(p)) {
        s.allow_http = b;
    }
    if let Some(f) = t.get("endpoint")
        && let Some(text) = f.text(p)
    {
        let host = text.strip_prefix("https://").or_else(|| text.strip_prefix("http://"));
        match host {
            Some(h) if !h.is_empty() && !h.starts_with('/') => {
                if text.starts_with("http://") && !s.allow_http {
                    f.problem(
                        p,
                        "an http:// endpoint sends the raw files unencrypted",
                        "use https://, or set `allow_http = true` beside it (a test server, a private network)",
                    );
                }
                s.endpoint = Some(text.trim_end_matches('/').to_string());
            }
            _ => f.problem(
                p,
                format!("`{}` is not the address of an S3 server", text.escape_default()),
                "write its base URL, e.g. `endpoint = \"https://minio.lab.example:9000\"`",
            ),
        }
    }
    if let Some(f) = t.get("region")
        && let Some(text) = f.text(p)
    {
        if text.trim().is_empty() {
            f.problem(
                p,
                "the region is empty",
                "write the bucket's region, e.g. `region = \"eu-west-1\"`, or remove it",
            );
        } else {
            s.region = Some(text);
        }
    }
    if let Some(f) = t.get("credentials_command")
        && let Some(argv) = f.strings(p)
    {
        if argv.is_empty() {
            f.problem(
                p,
                "the command is empty",
                "write the program and its arguments, e.g. `[\"pass\", \"show\", \"lab-s3\"]`, or remove it to use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            );
        } else {
            s.credentials_command = argv.into_iter().map(|(a, _)| a).collect();
        }
    }
    if let Some(b) = t.get("keep_local").and_then(|f| f.bool(p)) {
        s.keep_local = b;
    }
    if let Some(f) = t.get("local")
        && let Some(text) = f.text(p)
    {
        if text.trim().is_empty() {
            f.problem(
                p,
                "the folder is empty",
                "name the local folder raw files are written to first, e.g. `local = \"artifacts\"`",
            );
        } else {
            *local = base.join(text);
        }
    }
    if let Some(d) = t.get("drain_timeout").and_then(|f| f.duration(p)) {
        s.drain_timeout = d;
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{ConfigError, Lab, parse_lab};

    fn lab(lab_table: &str) -> Result<Lab, ConfigError> {
        parse_lab(&format!("[lab]\nname = \"bench\"\n{lab_table}"), Path::new("/labs/bench/lab.toml"))
    }

    fn error(lab_table: &str) -> String {
        lab(lab_table).map(|_| ()).unwrap_err().to_string()
    }

    #[test]
    fn a_path_keeps_the_folder_and_no_bucket() {
        let l = lab("artifacts = \"out\"\n").unwrap();
        assert_eq!((l.artifacts_dir.as_path(), l.object_store), (Path::new("/labs/bench/out"), None));
        assert_eq!(lab("").unwrap().artifacts_dir, Path::new("/labs/bench/artifacts"), "the default");
    }

    #[test]
    fn an_s3_url_names_the_bucket_and_prefix_with_a_local_folder_in_front() {
        let l = lab("artifacts = \"s3://lab-raw/shelf-1//runs/\"\n").unwrap();
        let s = l.object_store.unwrap();
        assert_eq!((s.bucket.as_str(), s.prefix.as_str()), ("lab-raw", "shelf-1/runs"));
        assert_eq!(s.url(), "s3://lab-raw/shelf-1/runs");
        assert_eq!(l.artifacts_dir, Path::new("/labs/bench/artifacts"), "files are written here first");
        assert!(s.keep_local && !s.allow_http && s.endpoint.is_none() && s.credentials_command.is_empty());
        assert_eq!(lab("artifacts = \"s3://lab-raw\"\n").unwrap().object_store.unwrap().prefix, "");
    }

    #[test]
    fn every_object_store_key_is_read() {
        let l = lab(r#"artifacts = "s3://lab-raw/p"
[lab.object_store]
endpoint = "http://127.0.0.1:9000/"
allow_http = true
region = "eu-west-1"
credentials_command = ["pass", "show", "lab-s3"]
keep_local = false
local = "/var/lab/raw"
drain_timeout = "5s"
"#)
        .unwrap();
        let s = l.object_store.unwrap();
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(s.region.as_deref(), Some("eu-west-1"));
        assert_eq!(s.credentials_command, ["pass", "show", "lab-s3"]);
        assert!(s.allow_http && !s.keep_local);
        assert_eq!(s.drain_timeout, std::time::Duration::from_secs(5));
        assert_eq!(l.artifacts_dir, Path::new("/var/lab/raw"));
    }

    #[test]
    fn a_wrong_url_is_one_line_naming_the_file_the_key_and_the_fix() {
        for (url, says) in [
            ("gs://lab-raw/p", "`gs://` is not a place for raw files this lab knows; fix: write a folder path"),
            ("s3://", "the URL names no bucket; fix: write `artifacts = \"s3://BUCKET/PREFIX\"`"),
            ("s3:///p", "the URL names no bucket"),
            ("s3://Lab_Raw/p", "`Lab_Raw` is not a bucket name; fix: a bucket's name has 3 to 63"),
            ("s3://lab-raw/a/../b", "has a `.` or `..` part"),
        ] {
            let e = error(&format!("artifacts = \"{url}\"\n"));
            assert!(e.starts_with("/labs/bench/lab.toml:3:13: lab.artifacts: "), "{url}: {e}");
            assert!(e.contains(says) && !e.contains('\n'), "{url}: {e}");
        }
    }

    #[test]
    fn object_store_settings_without_a_bucket_or_with_plain_http_are_refused() {
        let e = error("artifacts = \"out\"\n[lab.object_store]\nregion = \"x\"\n");
        assert!(e.contains("lab.object_store: object_store settings are for a bucket"), "{e}");
        let e = error("artifacts = \"s3://lab-raw\"\n[lab.object_store]\nendpoint = \"http://127.0.0.1:9\"\n");
        assert!(e.contains("lab.object_store.endpoint: an http:// endpoint") && e.contains("allow_http = true"), "{e}");
        let e = error("artifacts = \"s3://lab-raw\"\n[lab.object_store]\nendpoint = \"ftp://x\"\n");
        assert!(e.contains("is not the address of an S3 server"), "{e}");
        let e = error("artifacts = \"s3://lab-raw\"\n[lab.object_store]\ncredentials_command = []\nsecret = \"x\"\n");
        assert!(e.contains("credentials_command: the command is empty") && e.contains("secret"), "{e}");
    }
}
