//! The phones an adb server lists and what each one is, read without changing anything on
//! the phone (`lab discover`): `adb devices -l`, then one batched `getprop` per authorized
//! phone. `AndroidDevice::identify` reads its properties through the same call.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::adb::{Adb, quote_argv};
use super::adb_list_error::AdbListError;
use crate::collect::android::adb_devices::{self, AdbEntry};
use crate::config::AdbServer;
use crate::device::DeviceError;
use crate::transport::{CommandSpec, Transport, TransportError};

/// What a phone says it is (`getprop`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AndroidProps {
    /// `ro.product.model` (`Pixel 8`).
    pub model: String,
    /// `ro.product.manufacturer` (`Google`).
    pub manufacturer: String,
    /// `ro.build.version.release` (`14`).
    pub release: String,
    /// `ro.build.version.sdk` (`34`).
    pub sdk: String,
    pub fingerprint: String,
    /// `ro.serialno`: the phone's own serial, also over Wi-Fi adb where adb's is `IP:PORT`.
    pub serialno: String,
}

const PROPS: [&str; 6] = [
    "ro.product.model",
    "ro.product.manufacturer",
    "ro.build.version.release",
    "ro.build.version.sdk",
    "ro.build.fingerprint",
    "ro.serialno",
];

/// `adb [server] devices -l` on a host: every phone that server sees, in any state. Starting
/// a server that is not running is adb's own doing, as with `adb devices` by hand.
pub async fn list_attached(
    transport: &Arc<dyn Transport>,
    server: Option<&AdbServer>,
    limit: Duration,
) -> Result<Vec<AdbEntry>, AdbListError> {
    let mut cmd = CommandSpec::new("adb", &[]);
    if let Some(s) = server {
        cmd.args.extend(s.adb_args());
    }
    cmd.args.extend(["devices".to_string(), "-l".to_string()]);
    cmd.timeout = limit;
    let out = transport.exec(&cmd).await.map_err(|e| match e {
        TransportError::Spawn { host, .. } => AdbListError::NotInstalled { host },
        TransportError::Timeout { timeout, .. } => AdbListError::Hung { command: cmd.display(), timeout },
        e => AdbListError::Transport(e),
    })?;
    if !out.success() {
        let said = out.stderr_text();
        let said = said.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("(nothing on stderr)");
        return Err(AdbListError::Exited { command: cmd.display(), status: out.status, said: said.into() });
    }
    Ok(adb_devices::parse(&out.stdout_text()))
}

/// The phone's identity properties in one shell call (getprop only: nothing is set).
pub async fn read_props(adb: &Adb, limit: Duration) -> Result<AndroidProps, DeviceError> {
    let commands: Vec<String> = PROPS.iter().map(|p| quote_argv(&["getprop", p])).collect();
    let parts = adb.batch(&commands, limit).await?;
    let v: Vec<&str> = parts.iter().map(|p| p.trim()).collect();
    Ok(AndroidProps {
        model: v[0].into(),
        manufacturer: v[1].into(),
        release: v[2].into(),
        sdk: v[3].into(),
        fingerprint: v[4].into(),
        serialno: v[5].into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::android::adb_devices::AdbState;
    use crate::testing::{Reply, ScriptedTransport};

    fn props_reply() -> Reply {
        let parts = ["Pixel 8", "Google", "14", "34", "google/shiba/shiba:14/AP1A/1:user/release-keys", "3A1B2C"];
        let body: String = parts.iter().map(|p| format!("{p}\n@@lab-part@@\n")).collect();
        Reply::ok(&format!("{body}__lab_exit=0\n"))
    }

    #[tokio::test]
    async fn lists_the_server_s_phones_and_reads_props_with_getprop_only() {
        let t = Arc::new(ScriptedTransport::new("shelf-1"));
        t.on(
            &["adb", "-H", "10.0.0.2", "-P", "5038", "devices", "-l"],
            vec![Reply::ok(
                "List of devices attached\n3A1B2C  device usb:1-1.2 product:shiba model:Pixel_8 device:shiba transport_id:1\n\
                 R58M  unauthorized usb:1-1.3 transport_id:2\n",
            )],
        );
        t.on(&["adb", "-s", "3A1B2C", "shell"], vec![props_reply()]);
        let dyn_t: Arc<dyn Transport> = t.clone();
        let server = AdbServer { host: "10.0.0.2".into(), port: 5038 };
        let listed = list_attached(&dyn_t, Some(&server), Duration::from_secs(5)).await.unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[1].state, AdbState::Unauthorized);
        let adb = Adb::new(dyn_t, "3A1B2C", "3A1B2C", None);
        let p = read_props(&adb, Duration::from_secs(5)).await.unwrap();
        assert_eq!((p.model.as_str(), p.release.as_str(), p.sdk.as_str()), ("Pixel 8", "14", "34"));
        assert_eq!(p.serialno, "3A1B2C");
        // Every shell command is a getprop: nothing on the phone is set.
        let shell = t.calls_of("adb").into_iter().filter(|c| c.contains(" shell ")).collect::<Vec<_>>();
        assert_eq!(shell.len(), 1);
        let line = shell[0].split_once(" shell ").unwrap().1;
        for part in line.split("; ").filter(|p| !p.starts_with("echo")) {
            assert!(part.replace('\'', "").starts_with("getprop ro."), "{part}");
        }
    }

    #[tokio::test]
    async fn a_hung_adb_is_an_error_within_its_limit_and_a_failing_one_says_what_it_said() {
        let t = Arc::new(ScriptedTransport::new("shelf-1"));
        t.on(&["adb", "devices"], vec![Reply::ok("").after(Duration::from_secs(3600))]);
        let dyn_t: Arc<dyn Transport> = t.clone();
        let started = std::time::Instant::now();
        let e = list_attached(&dyn_t, None, Duration::from_millis(200)).await.unwrap_err().to_string();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(e.contains("did not answer within 200ms") && e.contains("adb kill-server"), "{e}");
        let none: Arc<dyn Transport> = Arc::new(ScriptedTransport::new("shelf-2"));
        let e = list_attached(&none, None, Duration::from_secs(1)).await.unwrap_err().to_string();
        assert!(e.contains("`adb devices -l` exited Some(127)"), "{e}");
    }

    #[tokio::test]
    async fn a_cut_answer_is_a_lost_phone() {
        let t = Arc::new(ScriptedTransport::new("h"));
        t.on(&["adb"], vec![Reply::ok("Pixel 8\n@@lab-part@@\n__lab_exit=0\n")]);
        let adb = Adb::new(t, "p", "S", None);
        assert!(read_props(&adb, Duration::from_secs(1)).await.unwrap_err().is_disconnect());
    }
}
