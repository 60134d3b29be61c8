//! `lab artifacts sync`: every raw file this machine holds that is not confirmed in the
//! lab's bucket is uploaded and checked, with a line per file and a summary
//! (docs/artifacts.md). Exit 0 when every file here is confirmed, 3 when the object store
//! cannot be reached.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

use super::exit::{self, CliError};
use super::reporter::human_bytes;
use crate::config::Lab;
use crate::store::{MANIFEST, RawFileRow, RawFiles, Store, files_under, upload_confirmed};

#[derive(Debug, clap::Args)]
pub struct ArtifactsArgs {
    #[command(subcommand)]
    pub command: ArtifactsCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ArtifactsCommand {
    /// Upload every raw file of this machine not yet confirmed in the lab's bucket (the
    /// object store was down, or a run stopped first), each checked by reading it back.
    /// Exits 0 when every file here is confirmed, 3 when the object store cannot be reached.
    Sync,
}

pub async fn run(lab: &Lab, args: &ArtifactsArgs) -> Result<(String, u8), CliError> {
    let ArtifactsCommand::Sync = args.command;
    let raw = RawFiles::of_lab(lab)?;
    let Some(bucket) = raw.bucket().cloned() else {
        return Err(CliError::bad_input(format!(
            "{}: [lab] artifacts is a folder, so raw files have no other place to go; fix: set `artifacts = \"s3://BUCKET/PREFIX\"` to keep them in a bucket",
            lab.source.display()
        )));
    };
    let store = super::context::open_store(lab)?;
    let found = blocking({
        let (s, raw) = (store.clone(), raw.clone());
        move || unrecorded(&s, &raw)
    })
    .await?;
    for (campaign, sub) in &found {
        raw.add(&store, campaign, sub).await?;
    }
    let (place, host, root) = (bucket.place().to_string(), crate::store::this_host(), raw.local().to_path_buf());
    let pending = blocking({
        let s = store.clone();
        move || Ok(s.pending_raw_files(&place)?)
    })
    .await?;
    let (here, elsewhere): (Vec<RawFileRow>, Vec<RawFileRow>) =
        pending.into_iter().partition(|r| r.host == host && root.join(&r.campaign).join(&r.path).is_file());
    let keep_local = matches!(raw, RawFiles::Bucket { keep_local: true, .. });
    let (started, total) = (Instant::now(), here.len());
    let (mut confirmed, mut bytes, mut failed) = (0usize, 0u64, 0usize);
    for (i, row) in here.iter().enumerate() {
        match upload_confirmed(&bucket, &store, row, &root, keep_local).await {
            Ok(n) => {
                confirmed += 1;
                bytes += n;
                eprintln!("[{}/{total}] {}: confirmed ({})", i + 1, row.key, human_bytes(n));
            }
            Err(e) => {
                crate::store::note_failure(&store, row, &e).await;
                eprintln!("[{}/{total}] {}: {e}", i + 1, row.key);
                if e.is_unreachable() {
                    let left = total - confirmed;
                    return Err(CliError::new(
                        exit::UNAVAILABLE,
                        format!("{confirmed} files confirmed, {left} still pending and kept local: {e}"),
                    ));
                }
                failed += 1;
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let mut out = format!(
        "{confirmed} of {total} pending files uploaded and confirmed in {} ({}, {:.1} s, {}/s)",
        bucket.place(),
        human_bytes(bytes),
        secs,
        human_bytes((bytes as f64 / secs.max(1e-3)) as u64)
    );
    if found.is_empty() && total == 0 {
        out = format!("nothing pending here: every raw file of this machine is confirmed in {}", bucket.place());
    }
    let mut others: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &elsewhere {
        *others.entry(r.host.as_str()).or_default() += 1;
    }
    if !others.is_empty() {
        let list: Vec<String> = others.iter().map(|(h, n)| format!("{n} on {h}")).collect();
        out.push_str(&format!("; pending on other machines (run `lab artifacts sync` there): {}", list.join(", ")));
    }
    if failed > 0 {
        return Err(CliError::internal(format!("{out}; {failed} files FAILED and stay local and pending (see above)")));
    }
    Ok((out + "\n", exit::OK))
}

/// Files of recorded attempts (and campaigns' manifests) in the local folder that the
/// store has no row for: a run stopped between recording an attempt and listing its files.
/// Each as (campaign, the attempt's folder or `manifest.json`).
fn unrecorded(store: &Store, raw: &RawFiles) -> Result<Vec<(String, String)>, crate::store::RawFilesError> {
    let mut out = Vec::new();
    for c in store.campaigns()? {
        let dir = raw.local().join(&c.id);
        if !dir.is_dir() {
            continue;
        }
        let rows: BTreeSet<String> = store.raw_files(&c.id)?.into_iter().map(|r| r.path).collect();
        let local = files_under(&dir).unwrap_or_default();
        if local.iter().all(|p| rows.contains(p) || !p.contains('/') && p != MANIFEST) {
            continue;
        }
        if dir.join(MANIFEST).is_file() && !rows.contains(MANIFEST) {
            out.push((c.id.clone(), MANIFEST.to_string()));
        }
        // Only recorded attempts' folders: one without a row is a crash's leftover.
        let prefix = format!("{}/", c.id);
        for a in store.attempts(&c.id)? {
            let Some((_, sub)) = a.artifact_dir.split_once(&prefix) else { continue };
            let missing =
                files_under(&dir.join(sub)).unwrap_or_default().iter().any(|p| !rows.contains(&format!("{sub}/{p}")));
            if missing && Path::new(sub).components().count() > 0 {
                out.push((c.id.clone(), sub.to_string()));
            }
        }
    }
    Ok(out)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::store::RawFilesError> + Send + 'static,
) -> Result<T, CliError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => Ok(r?),
        Err(e) => Err(CliError::internal(format!("a store call stopped: {e}"))),
    }
}
