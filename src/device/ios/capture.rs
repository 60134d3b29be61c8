//! Getting a sysdiagnose off the phone after re-tether, for its powerlog: iOS 17+ makes
//! one on request (CoreDevice's diagnostics service streams it); before 17 the operator
//! triggers it on the phone (both volume buttons and the side button) and the archive is
//! pulled through crash-report copy as a stream, then deleted from the phone.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt;
use idevice::IdeviceService;
use idevice::afc::opcode::AfcFopenMode;
use idevice::crashreportcopymobile::CrashReportCopyMobileClient;
use tokio::io::AsyncWriteExt;

use super::error::IosError;
use super::phone::{CALL, Phone};
use super::tunnel::{TunnelError, rsd_service};

/// Writing a sysdiagnose takes the phone several minutes.
pub const SYSDIAGNOSE: Duration = Duration::from_secs(20 * 60);
/// Where iOS ≤ 16 leaves a sysdiagnose the operator triggered, inside crash-report copy.
const SYSDIAGNOSE_DIRS: [&str; 2] = ["DiagnosticLogs/sysdiagnose", "."];

impl Phone {
    /// iOS 17+: asks for a sysdiagnose and streams it into `to`.
    pub async fn capture_sysdiagnose(&self, to: &Path) -> Result<u64, IosError> {
        self.bounded("capturing a sysdiagnose", SYSDIAGNOSE, async {
            let p = self.provider().await?;
            let to = to.to_path_buf();
            let handle = tokio::runtime::Handle::current();
            // Not `Send` (the RSD connect and the stream): on a thread of its own.
            let written = tokio::task::spawn_blocking(move || handle.block_on(stream_sysdiagnose(p, to)))
                .await
                .map_err(|e| self.failed("capturing a sysdiagnose", e.to_string()))?;
            written.map_err(|(what, e)| IosError::from_idevice(&self.at, what, e))
        })
        .await
    }

    /// iOS ≤ 16: the newest `sysdiagnose_*.tar.gz` in crash-report copy, copied to `to` as
    /// a stream and deleted from the phone; `None` while there is none.
    pub async fn pull_sysdiagnose(&self, to: &Path) -> Result<Option<(String, u64)>, IosError> {
        self.bounded("pulling the sysdiagnose", SYSDIAGNOSE, async {
            let p = self.provider().await?;
            let what = "pulling the sysdiagnose through crash-report copy";
            let err = |e| IosError::from_idevice(&self.at, what, e);
            // Moves finished reports (a new sysdiagnose among them) where copy sees them.
            idevice::crashreportcopymobile::flush_reports(&p).await.map_err(err)?;
            let mut crc = CrashReportCopyMobileClient::connect(&p).await.map_err(err)?;
            let mut found: Vec<String> = Vec::new();
            for dir in SYSDIAGNOSE_DIRS {
                if let Ok(names) = crc.ls(Some(dir)).await {
                    let prefix = if dir == "." { String::new() } else { format!("{dir}/") };
                    found.extend(names.into_iter().filter(|n| is_sysdiagnose(n)).map(|n| format!("{prefix}{n}")));
                }
            }
            // The folder name carries the capture time (sysdiagnose_YYYY.MM.DD_HH-MM-SS…): newest last.
            found.sort_by_key(|n| n.rsplit('/').next().unwrap_or(n).to_string());
            let Some(name) = found.pop() else { return Ok(None) };
            let mut afc = crc.to_afc_client();
            let mut file =
                tokio::fs::File::create(to).await.map_err(|e| self.failed(what, format!("{}: {e}", to.display())))?;
            let bytes = {
                let mut fd = afc.open(name.clone(), AfcFopenMode::RdOnly).await.map_err(err)?;
                let n = tokio::io::copy(&mut fd, &mut file).await.map_err(|e| self.failed(what, e.to_string()))?;
                fd.close().await.map_err(err)?;
                n
            };
            file.flush().await.map_err(|e| self.failed(what, e.to_string()))?;
            // Sysdiagnoses are hundreds of MB: none is left to fill the phone.
            afc.remove(name.clone()).await.map_err(err)?;
            Ok(Some((name, bytes)))
        })
        .await
    }

    /// Waits (polling once a minute: the phone needs minutes to write it) for the
    /// sysdiagnose the operator triggered, up to `limit`.
    pub async fn wait_sysdiagnose(&self, to: &Path, limit: Duration) -> Result<(String, u64), IosError> {
        let start = tokio::time::Instant::now();
        loop {
            if let Some(got) = self.pull_sysdiagnose(to).await? {
                return Ok(got);
            }
            if start.elapsed() >= limit {
                return Err(self.failed(
                    "waiting for the sysdiagnose",
                    format!(
                        "none appeared in crash reports within {} min; fix: trigger it on the phone (hold both volume \
                         buttons and the side button for about a second until it vibrates) and wait",
                        limit.as_secs() / 60
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_secs(60).min(CALL * 2)).await;
        }
    }
}

fn is_sysdiagnose(name: &str) -> bool {
    let n = name.rsplit('/').next().unwrap_or(name);
    n.starts_with("sysdiagnose_") && n.ends_with(".tar.gz")
}

async fn stream_sysdiagnose(p: super::mux::Provider, to: PathBuf) -> Result<u64, TunnelError> {
    use idevice::RsdService;
    let what = "capturing a sysdiagnose over the diagnostics service";
    let (_tunnel, stream) = rsd_service(&p, "com.apple.coredevice.diagnosticsservice", what, what).await?;
    let mut diag = idevice::core_device::DiagnostisServiceClient::from_stream(stream).await.map_err(|e| (what, e))?;
    let mut res = diag.capture_sysdiagnose(false).await.map_err(|e| (what, e))?;
    let mut file = tokio::fs::File::create(&to).await.map_err(|e| (what, e.into()))?;
    let mut n = 0u64;
    while let Some(chunk) = res.stream.next().await {
        let chunk = chunk.map_err(|e| (what, e))?;
        file.write_all(&chunk).await.map_err(|e| (what, e.into()))?;
        n += chunk.len() as u64;
    }
    file.flush().await.map_err(|e| (what, e.into()))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_sysdiagnose_archives_are_taken() {
        assert!(super::is_sysdiagnose(
            "DiagnosticLogs/sysdiagnose/sysdiagnose_2026.03.01_10-00-00+0100_iPhone-OS_iPhone_20A362.tar.gz"
        ));
        assert!(!super::is_sysdiagnose("DiagnosticLogs/sysdiagnose/sysdiagnose_x.tar.gz.tmp"));
        assert!(!super::is_sysdiagnose("JetsamEvent-2026-03-01.ips"));
    }
}
