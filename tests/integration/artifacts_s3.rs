//! Raw files in an object store (docs/artifacts.md) through the real binary, on a real S3
//! API: moto's server (tests/s3-server.sh; `.ci/run` starts one, and `LAB_REQUIRE_S3=1`
//! makes a missing moto fail there). Every object is read back with boto3, AWS's own
//! client, and its SHA-256 computed here from its bytes.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::TempLab;
use common::s3::S3;
use lab::store::{RawFileRow, Store};

/// The default lab with its raw files in `bucket` on `endpoint`, written first to the
/// folder `local` beside the lab file, and its store at `store` (a SQLite file or a
/// PostgreSQL URL).
fn bucket_lab(endpoint: &str, bucket: &str, local: &str, store: impl std::fmt::Display, extra: &str) -> TempLab {
    let store = store.to_string();
    let text = std::fs::read_to_string(common::root().join("lab.toml")).unwrap();
    let text = text
        .replace("artifacts = \"artifacts\"", &format!("artifacts = \"s3://{bucket}/runs\""))
        .replace("store = \"artifacts/lab.db\"", &format!("store = \"{store}\""));
    assert!(text.contains("s3://") && text.contains(&store), "the default lab names both");
    TempLab::from_text(&format!(
        "{text}\n[lab.object_store]\nendpoint = \"{endpoint}\"\nallow_http = true\nregion = \"us-east-1\"\nlocal = \"{local}\"\n{extra}"
    ))
}

/// `lab` with moto's (unchecked) credentials in the environment.
fn lab_cmd(lab: &TempLab, args: &[&str]) -> assert_cmd::Command {
    let mut c = lab.cmd(args);
    c.env("AWS_ACCESS_KEY_ID", "lab-test")
        .env("AWS_SECRET_ACCESS_KEY", "lab-test-secret")
        .timeout(Duration::from_secs(300));
    c
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Every file of the campaign's local folder that is a raw file (the attempts' files and
/// the manifest; not the report files written from the store): path → bytes.
fn local_raw_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    lab::store::files_under(dir)
        .unwrap()
        .into_iter()
        .filter(|p| p.contains('/') || p == "manifest.json")
        .map(|p| {
            let bytes = std::fs::read(dir.join(&p)).unwrap();
            (p, bytes)
        })
        .collect()
}

fn only_campaign(store: &Store) -> String {
    let c = store.campaigns().unwrap();
    assert_eq!(c.len(), 1);
    c[0].id.clone()
}

/// The store's rows agree with the local files (every one has a row, with its size and
/// SHA-256), and each confirmed row's object, read back by boto3, has that size and SHA-256.
fn check_rows(s3: &S3, bucket: &str, rows: &[RawFileRow], local: &BTreeMap<String, Vec<u8>>) {
    let by_path: BTreeMap<&str, &RawFileRow> = rows.iter().map(|r| (r.path.as_str(), r)).collect();
    assert_eq!(by_path.keys().copied().collect::<Vec<_>>(), local.keys().map(String::as_str).collect::<Vec<_>>());
    for (path, bytes) in local {
        let r = by_path[path.as_str()];
        assert_eq!((r.size, r.sha256.as_str()), (bytes.len() as u64, sha256_hex(bytes).as_str()), "{path}");
        assert_eq!(r.bucket, format!("s3://{bucket}"));
        assert_eq!(r.key, format!("runs/{}/{path}", r.campaign));
    }
    if rows.iter().all(|r| r.confirmed_at.is_none()) {
        return;
    }
    let objects = s3.objects(bucket);
    for r in rows.iter().filter(|r| r.confirmed_at.is_some()) {
        assert_eq!(objects.get(&r.key), Some(&(r.size, r.sha256.clone())), "{}", r.key);
    }
}

#[test_needs::needs(s3)]
#[test]
fn every_raw_file_of_every_trial_is_in_the_bucket_with_the_size_and_sha256_the_store_holds() {
    let s3 = S3::shared();
    let bucket = s3.bucket("run");
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("lab.db");
    let lab = bucket_lab(&s3.endpoint, &bucket, "raw", store_path.display(), "");
    let out = lab_cmd(&lab, &["run", "runbooks/quickstart.toml"]).assert().success().get_output().stdout.clone();
    let out = String::from_utf8_lossy(&out);
    let store = Store::open(&store_path).unwrap();
    let id = only_campaign(&store);
    let rows = store.raw_files(&id).unwrap();
    let local = local_raw_files(&lab.dir.path().join("raw").join(&id));
    let attempts = store.attempts(&id).unwrap().len();
    assert!(local.len() > attempts, "every attempt wrote files: {} files, {attempts} attempts", local.len());
    assert!(rows.iter().all(|r| r.confirmed_at.is_some() && r.tries == 0), "all confirmed at the first try");
    check_rows(&s3, &bucket, &rows, &local);
    assert_eq!(s3.objects(&bucket).len(), rows.len(), "nothing else in the bucket");
    assert!(out.contains(&format!("raw files: {} uploaded and confirmed", rows.len())), "{out}");
    assert!(!out.contains("lab-test-secret"), "{out}");
    // keep_local (the default): the local copies stay.
    assert!(lab.dir.path().join("raw").join(&id).join("manifest.json").is_file());
}

#[test_needs::needs(s3)]
#[test]
fn with_the_object_store_down_files_stay_local_and_pending_and_sync_uploads_them_once_it_is_back() {
    // A port moto answered on, now closed: the object store is down for the whole run.
    let mut s3 = S3::start(None);
    let port = s3.port();
    s3.stop();
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("lab.db");
    let bucket = format!("down-{}", std::process::id());
    let lab = bucket_lab(
        &format!("http://127.0.0.1:{port}"),
        &bucket,
        "raw",
        store_path.display(),
        "drain_timeout = \"2s\"\n",
    );
    let out = lab_cmd(&lab, &["run", "runbooks/quickstart.toml"]).assert().success().get_output().stdout.clone();
    let out = String::from_utf8_lossy(&out);
    assert!(out.contains("cannot be reached") && out.contains("PENDING (kept local"), "{out}");
    let store = Store::open(&store_path).unwrap();
    let id = only_campaign(&store);
    let local = local_raw_files(&lab.dir.path().join("raw").join(&id));
    let rows = store.raw_files(&id).unwrap();
    assert!(rows.iter().all(|r| r.confirmed_at.is_none()), "nothing confirmed while the store is down");
    assert!(
        rows.iter().any(|r| r.tries > 0 && r.last_error.as_deref().is_some_and(|e| e.contains("cannot be reached")))
    );
    check_rows(&s3, &bucket, &rows, &local);
    let before: BTreeMap<String, Vec<u8>> = local.clone();

    // Still down: sync says so, exit 3, and loses nothing.
    let down = lab_cmd(&lab, &["artifacts", "sync"]).assert().code(3).get_output().stderr.clone();
    assert!(
        String::from_utf8_lossy(&down).contains("still pending and kept local"),
        "{}",
        String::from_utf8_lossy(&down)
    );
    assert_eq!(local_raw_files(&lab.dir.path().join("raw").join(&id)), before);

    // Back (on the same port; its bucket made again, as moto keeps none): sync uploads all.
    let s3 = S3::start(Some(port));
    s3.list_create(&bucket);
    let ok = lab_cmd(&lab, &["artifacts", "sync"]).assert().success().get_output().clone();
    let said = String::from_utf8_lossy(&ok.stdout);
    assert!(
        said.starts_with(&format!("{} of {} pending files uploaded and confirmed", rows.len(), rows.len())),
        "{said}"
    );
    let rows = store.raw_files(&id).unwrap();
    assert!(rows.iter().all(|r| r.confirmed_at.is_some()), "all confirmed after sync");
    check_rows(&s3, &bucket, &rows, &before);
    assert_eq!(s3.objects(&bucket).len(), rows.len());
    assert_eq!(local_raw_files(&lab.dir.path().join("raw").join(&id)), before, "nothing lost, nothing changed");
    let again = lab_cmd(&lab, &["artifacts", "sync"]).assert().success().get_output().stdout.clone();
    assert!(String::from_utf8_lossy(&again).starts_with("nothing pending here"));
}

#[test_needs::needs(s3)]
#[test]
fn lab_serve_on_another_lab_file_downloads_a_raw_file_from_the_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lab.db");
    serve_from_the_bucket(&path.display().to_string(), || Store::open(&path).unwrap());
}

/// The shared lab: two lab files on one PostgreSQL store and one bucket.
#[test_needs::needs(s3, postgres)]
#[test]
fn lab_serve_on_another_lab_file_of_a_postgresql_store_downloads_a_raw_file_from_the_bucket() {
    let url = common::fresh_postgres_database();
    serve_from_the_bucket(&url, || Store::open_postgres(&lab::store::PgUrl::parse(&url).unwrap()).unwrap());
}

/// A campaign run by one lab file; `lab serve` of another (the same store and bucket, its
/// own empty local folder) serves one of its raw files and its manifest from the bucket.
fn serve_from_the_bucket(store_at: &str, open: impl Fn() -> Store) {
    let s3 = S3::shared();
    let bucket = s3.bucket("serve");
    let runner = bucket_lab(&s3.endpoint, &bucket, "raw", store_at, "");
    lab_cmd(&runner, &["run", "runbooks/quickstart.toml"]).assert().success();
    let store = open();
    let id = only_campaign(&store);
    let row = store.raw_files(&id).unwrap().into_iter().find(|r| r.path.contains('/')).unwrap();
    let original = std::fs::read(runner.dir.path().join("raw").join(&id).join(&row.path)).unwrap();

    let other = bucket_lab(&s3.endpoint, &bucket, "elsewhere", store_at, "");
    let mut child = other
        .process(&["serve", "--bind", "127.0.0.1:0"])
        .env("AWS_ACCESS_KEY_ID", "lab-test")
        .env("AWS_SECRET_ACCESS_KEY", "lab-test-secret")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = crate::serve::address_said(&mut child);
    let got = http_get(&addr, &format!("/artifacts/{id}/{}", row.path));
    let manifest = http_get(&addr, &format!("/campaigns/{id}/manifest.json"));
    let _ = child.kill();
    let _ = child.wait();
    assert!(!other.dir.path().join("elsewhere").join(&id).exists(), "nothing of it is local there");
    assert_eq!(got, original, "{}", row.path);
    assert_eq!(sha256_hex(&got), row.sha256);
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(manifest["campaign"].as_str(), Some(id.as_str()), "{manifest}");
}

/// The body of a 200 answer to `GET path` (with a Content-Length, never chunked).
pub(crate) fn http_get(addr: &str, path: &str) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{path}: {head}\n{}", String::from_utf8_lossy(&raw[split..]));
    assert!(!head.contains("transfer-encoding: chunked"), "{head}");
    raw[split + 4..].to_vec()
}

#[test]
fn a_bad_bucket_url_is_exit_2_one_line_and_creates_nothing() {
    for (artifacts, says) in [
        ("gs://lab-raw/runs", "lab.artifacts: `gs://` is not a place for raw files this lab knows"),
        ("s3:///runs", "lab.artifacts: the URL names no bucket; fix: write `artifacts = \"s3://BUCKET/PREFIX\"`"),
    ] {
        let text = std::fs::read_to_string(common::root().join("lab.toml")).unwrap();
        let lab =
            TempLab::from_text(&text.replace("artifacts = \"artifacts\"", &format!("artifacts = \"{artifacts}\"")));
        for args in [&["run", "runbooks/quickstart.toml"][..], &["artifacts", "sync"]] {
            let out = lab.cmd(args).assert().code(2).get_output().clone();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
            assert!(err.contains(&format!("lab.toml:6:13: {says}")), "{err}");
        }
        let left: Vec<_> = std::fs::read_dir(lab.dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("lab.toml")], "nothing created");
    }
}

#[test_needs::needs(s3)]
#[test]
fn the_next_campaign_uploads_what_an_earlier_one_left_pending_and_keep_local_false_deletes_only_confirmed_copies() {
    let mut s3 = S3::start(None);
    let port = s3.port();
    s3.stop();
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("lab.db");
    let bucket = format!("next-{}", std::process::id());
    let extra = "drain_timeout = \"2s\"\nkeep_local = false\n";
    let lab = bucket_lab(&format!("http://127.0.0.1:{port}"), &bucket, "raw", store_path.display(), extra);
    lab_cmd(&lab, &["run", "runbooks/quickstart.toml"]).assert().success();
    let store = Store::open(&store_path).unwrap();
    let first = only_campaign(&store);
    let folder = lab.dir.path().join("raw").join(&first);
    let before = local_raw_files(&folder);
    assert!(store.raw_files(&first).unwrap().iter().all(|r| r.confirmed_at.is_none()));
    assert_eq!(before.len(), store.raw_files(&first).unwrap().len(), "pending: every local copy kept");

    let s3 = S3::start(Some(port));
    s3.list_create(&bucket);
    lab_cmd(&lab, &["run", "runbooks/quickstart.toml"]).assert().success();
    let rows = store.raw_files(&first).unwrap();
    assert!(rows.iter().all(|r| r.confirmed_at.is_some()), "the second campaign's uploader took them up");
    let objects = s3.objects(&bucket);
    for (path, bytes) in &before {
        let r = rows.iter().find(|r| &r.path == path).unwrap();
        assert_eq!(objects.get(&r.key), Some(&(bytes.len() as u64, sha256_hex(bytes))), "{path}");
    }
    // keep_local = false: the confirmed attempts' copies are gone, the manifest stays.
    assert_eq!(local_raw_files(&folder).keys().collect::<Vec<_>>(), ["manifest.json"]);
    let all = store.campaigns().unwrap();
    assert_eq!(all.len(), 2);
    for c in &all {
        assert!(store.raw_files(&c.id).unwrap().iter().all(|r| r.confirmed_at.is_some()), "{}", c.id);
    }
    let again = lab_cmd(&lab, &["artifacts", "sync"]).assert().success().get_output().stdout.clone();
    assert!(String::from_utf8_lossy(&again).starts_with("nothing pending here"));
}

#[test_needs::needs(s3)]
#[test]
fn an_object_store_that_hangs_during_uploads_holds_the_campaign_no_longer_than_drain_timeout() {
    let s3 = S3::start(None);
    let bucket = s3.bucket("hang");
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("lab.db");
    let lab = bucket_lab(&s3.endpoint, &bucket, "raw", store_path.display(), "drain_timeout = \"3s\"\n");
    // Stopped where it is: connections are accepted, nothing answers.
    s3.freeze(true);
    let started = std::time::Instant::now();
    let out = lab_cmd(&lab, &["run", "runbooks/quickstart.toml"]).assert().success().get_output().stdout.clone();
    let took = started.elapsed();
    s3.freeze(false);
    let out = String::from_utf8_lossy(&out);
    assert!(out.contains("raw files: waiting for") && out.contains("PENDING (kept local"), "{out}");
    // The quickstart alone takes well under a second here; the wait is bounded by drain_timeout.
    assert!(took < Duration::from_secs(30), "the campaign took {took:?}");
    let store = Store::open(&store_path).unwrap();
    let id = only_campaign(&store);
    let local = local_raw_files(&lab.dir.path().join("raw").join(&id));
    assert!(store.raw_files(&id).unwrap().iter().any(|r| r.confirmed_at.is_none()));

    lab_cmd(&lab, &["artifacts", "sync"]).assert().success();
    let rows = store.raw_files(&id).unwrap();
    assert!(rows.iter().all(|r| r.confirmed_at.is_some()));
    check_rows(&s3, &bucket, &rows, &local);
    assert_eq!(local_raw_files(&lab.dir.path().join("raw").join(&id)), local, "nothing lost");
}

#[test_needs::needs(s3)]
#[test]
fn an_imported_trials_files_go_to_the_bucket_confirmed_and_rerun_reads_the_manifest_from_there() {
    let s3 = S3::shared();
    let bucket = s3.bucket("import");
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("lab.db");
    let lab = bucket_lab(&s3.endpoint, &bucket, "raw", store_path.display(), "");
    let capture = "tests/fixtures/devices/android/battery_adbts_emulator.txt";
    let args =
        ["import", "android-battery", capture, "--variant", "control", "--device", "pixel-7", "--campaign", "hand-1"];
    let out = lab_cmd(&lab, &args).assert().success().get_output().clone();
    assert!(String::from_utf8_lossy(&out.stderr).contains("uploaded and confirmed in s3://"), "{out:?}");
    let store = Store::open(&store_path).unwrap();
    let rows = store.raw_files("hand-1").unwrap();
    let local = local_raw_files(&lab.dir.path().join("raw/hand-1"));
    assert!(!rows.is_empty() && rows.iter().all(|r| r.confirmed_at.is_some()));
    check_rows(&s3, &bucket, &rows, &local);
    assert_eq!(
        local[&rows[0].path].len() as u64,
        s3.objects(&bucket)[&rows[0].key].0,
        "the object is the copied capture"
    );

    // A campaign run on one machine, re-run from another lab file whose local folder has
    // none of it: the manifest comes from the bucket.
    lab_cmd(&lab, &["run", "runbooks/quickstart.toml"]).assert().success();
    let run = store.campaigns().unwrap().into_iter().find(|c| c.id != "hand-1").unwrap().id;
    // Confirmed: `RawFiles::place` sends the read to the bucket (a missing local file
    // would otherwise fall back to a manifest rebuilt from the store's record).
    assert!(store.raw_file(&run, "manifest.json").unwrap().unwrap().confirmed_at.is_some());
    let other = bucket_lab(&s3.endpoint, &bucket, "elsewhere", store_path.display(), "");
    let out = lab_cmd(&other, &["rerun", &run]).assert().get_output().clone();
    let said = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 5)), "{said}");
    assert!(!said.contains("no manifest") && said.contains(&run), "{said}");
    assert!(!other.dir.path().join("elsewhere").join(&run).join("manifest.json").exists());
}
