//! `iphone sysdiagnose`: what the operator's button press (both volume buttons and the side
//! button) leaves on a phone before iOS 17, where crash-report copy finds it:
//! `DiagnosticLogs/sysdiagnose/sysdiagnose_<YYYY.MM.DD_HH-MM-SS+0000>_iPhone-OS_iPhone_<build>.tar.gz`,
//! a gzipped tar whose top folder (the same name without `.tar.gz`) holds
//! `logs/powerlogs/powerlog_<YYYY-MM-DD_HH-MM>_<8 hex>.PLSQL`.
//! For an iOS 17+ phone the same archive is staged in `DIR/sysdiagnose/<UDID>/` instead,
//! where the diagnostics service's capture (diagnostics.rs) takes it.

use std::io::{self, Write};
use std::path::PathBuf;

use chrono::DateTime;
use sha2::{Digest, Sha256};

use crate::phone::Store;
use crate::powerlog::{self, MARGIN_S, Window};

fn utc(t: f64, format: &str) -> io::Result<String> {
    let at = DateTime::from_timestamp(t.floor() as i64, 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{t}: not a time")))?;
    Ok(at.format(format).to_string())
}

/// Writes the archive into the phone's crash-report folder; its path.
pub fn write(store: &Store, udid: &str, w: &Window) -> io::Result<PathBuf> {
    let phone = store.phone(udid)?.ok_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, format!("no phone {udid} in {}", store.root().display()))
    })?;
    // Taken right after the window: the operator presses the buttons after re-tether.
    let top = format!("sysdiagnose_{}_iPhone-OS_iPhone_{}", utc(w.to, "%Y.%m.%d_%H-%M-%S+0000")?, phone.build_version);
    let id = hex::encode_upper(&Sha256::digest(format!("{udid} {}", w.from))[..4]);
    let log = format!("{top}/logs/powerlogs/powerlog_{}_{id}.PLSQL", utc(w.from - MARGIN_S, "%Y-%m-%d_%H-%M")?);
    let db = powerlog::write(w).map_err(|e| io::Error::other(format!("powerlog: {e}")))?;

    // Before iOS 17 where crash-report copy finds it; from 17 where the diagnostics
    // service's capture takes it (diagnostics.rs).
    let dir = if phone.major_version() >= 17 {
        crate::diagnostics::staged_dir(store, udid)
    } else {
        store.crashes(udid).join("DiagnosticLogs/sysdiagnose")
    };
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{top}.tar.gz"));
    // Written beside and renamed: a pull never sees half an archive.
    let partial = dir.join(format!(".{top}.tar.gz.partial"));
    let gz = flate2::write::GzEncoder::new(std::fs::File::create(&partial)?, flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let mut header = tar::Header::new_gnu();
    header.set_size(db.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(w.to.max(0.0) as u64);
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, &log, db.as_slice())?;
    tar.into_inner()?.finish()?.flush()?;
    std::fs::rename(&partial, &path)?;
    store.journal(
        udid,
        "sysdiagnose",
        "write",
        serde_json::json!({"archive": path.file_name().map(|n| n.to_string_lossy()), "powerlog": log,
            "from": w.from, "to": w.to, "charging_s": w.charging_s}),
    );
    Ok(path)
}

/// The command's window, checked.
pub fn window(from: f64, to: f64, charging_s: f64) -> Result<Window, String> {
    if !(from.is_finite() && to.is_finite() && from < to) {
        return Err(format!("--from {from} --to {to}: the window must end after it starts"));
    }
    if !(0.0..=to - from).contains(&charging_s) {
        return Err(format!("--charging-s {charging_s}: between 0 and the window's {} s", to - from));
    }
    Ok(Window { from, to, charging_s })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_that_end_first_or_charge_longer_than_they_last_are_refused() {
        assert!(window(10.0, 5.0, 0.0).unwrap_err().contains("must end after"));
        assert!(window(0.0, 100.0, 101.0).unwrap_err().contains("--charging-s 101"));
        assert_eq!(window(0.0, 100.0, 100.0).unwrap(), Window { from: 0.0, to: 100.0, charging_s: 100.0 });
    }

    #[test]
    fn the_archive_is_named_by_its_time_and_build_and_holds_the_powerlog() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("phones")).unwrap();
        std::fs::write(
            dir.path().join("phones/U.toml"),
            "DeviceName=\"a\"\nProductType=\"iPhone14,2\"\nProductVersion=\"16.7.2\"\nBuildVersion=\"20H115\"\n",
        )
        .unwrap();
        let store = Store::new(dir.path());
        // 2026-03-01T10:00:00Z for an hour.
        let path = write(&store, "U", &window(1_772_359_200.0, 1_772_362_800.0, 0.0).unwrap()).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(name, "sysdiagnose_2026.03.01_11-00-00+0000_iPhone-OS_iPhone_20H115.tar.gz");
        assert!(path.starts_with(dir.path().join("crashes/U/DiagnosticLogs/sysdiagnose")));
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap()));
        let paths: Vec<String> =
            tar.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect();
        assert_eq!(paths.len(), 1);
        let top = name.trim_end_matches(".tar.gz");
        assert!(paths[0].starts_with(&format!("{top}/logs/powerlogs/powerlog_2026-03-01_09-55_")), "{paths:?}");
        assert!(paths[0].ends_with(".PLSQL"));
        assert!(write(&store, "nope", &window(0.0, 1.0, 0.0).unwrap()).is_err());
    }
}
