//! Looking at one host: is it reachable, which phones do adb and usbmuxd list, which hub
//! port is each on, which power monitors answer. Every call is bounded by the options'
//! limit; what cannot be looked at becomes a note with the fix, never a wait.

use std::sync::Arc;
use std::time::Duration;

use super::finding::{FoundMonitor, FoundPhone, HostFindings, HubPlace, PhoneState};
use super::in_lab::mark_in_lab;
use super::look_error::LookError;
use super::options::DiscoverOptions;
use crate::collect::android::adb_devices::{AdbEntry, AdbState};
use crate::collect::hubs::uhubctl::Listing;
use crate::config::{Host, HostKind, Lab, Platform, join_host_port};
use crate::device::android::{Adb, offline_fix, read_props, unauthorized_fix};
use crate::device::ios::{AttachedIphone, IphoneState, Mux};
use crate::monitor::probe::{OTII_DEFAULT, list_monsoons, probe_otii};
use crate::tether::hubs;
use crate::transport::{CommandSpec, Transport, for_host_once};

/// Every host of `hosts` looked at concurrently, in the order given, each phone and
/// monitor marked with the lab's name for it when `lab` has it.
pub async fn discover(lab: &Lab, hosts: &[Host], opts: &DiscoverOptions) -> Vec<HostFindings> {
    let looks = hosts.iter().map(|h| discover_host(h, opts));
    let mut found = futures_util::future::join_all(looks).await;
    mark_in_lab(lab, &mut found);
    found
}

/// One host.
pub async fn discover_host(host: &Host, opts: &DiscoverOptions) -> HostFindings {
    let remote = matches!(host.kind, HostKind::Ssh(_));
    look(&host.name, remote, for_host_once(host), opts).await
}

/// One host through `transport`.
async fn look(host: &str, remote: bool, transport: Arc<dyn Transport>, opts: &DiscoverOptions) -> HostFindings {
    let mut out =
        HostFindings { host: host.to_string(), unreachable: None, phones: vec![], monitors: vec![], notes: vec![] };
    // An SSH host is logged in to first (which takes longer than one tool's answer): a host
    // that is not there is one line, not one per tool.
    let mut noop = CommandSpec::new("true", &[]);
    noop.timeout = opts.limit * 3;
    if remote && let Err(e) = transport.exec(&noop).await {
        out.unreachable = Some(format!("{e}; fix: `lab hosts check` says more"));
        return out;
    }
    let (android, iphones, listing, monitors) = tokio::join!(
        android(&transport, opts),
        iphones(host, remote, &transport, opts),
        // The note for the host: a missing uhubctl says how to install it.
        bounded(opts.limit, "uhubctl: `uhubctl -f`", async {
            hubs::read_within(transport.as_ref(), opts.limit).await.map_err(|e| match e.not_installed() {
                true => LookError::NoUhubctl { host: host.to_string() },
                false => LookError::Hubs(e),
            })
        }),
        monitors(host, remote, &transport, opts),
    );
    for part in [android, iphones] {
        match part {
            Ok(phones) => out.phones.extend(phones),
            Err(note) => out.notes.push(note.to_string()),
        }
    }
    if let Err(e) = &listing {
        out.notes.push(e.to_string());
    }
    // One order whatever the tools listed first: Android, then iPhones, each by id.
    out.phones.sort_by(|a, b| (a.platform != Platform::Android, &a.id).cmp(&(b.platform != Platform::Android, &b.id)));
    for p in &mut out.phones {
        p.host = host.to_string();
        p.hub = place(listing.as_ref().map_err(|_| ()), &serials(p), &id_serials(p));
        if let HubPlace::NotSwitching { why, .. } = &p.hub {
            p.problems.push(format!("no per-port power switching: {why}"));
        }
    }
    let (found_monitors, notes) = monitors;
    out.monitors = found_monitors;
    out.notes.extend(notes);
    out
}

async fn bounded<T, E>(
    limit: Duration,
    what: &'static str,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, LookError>
where
    LookError: From<E>,
{
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(LookError::TimedOut { what, limit }),
    }
}

/// The serials the phone may show on USB: those of its id, and its own serial where adb's
/// is not one (Wi-Fi adb's `IP:PORT`: `ro.serialno`).
fn serials(p: &FoundPhone) -> Vec<String> {
    let mut s = id_serials(p);
    s.extend(p.usb_serial.iter().filter(|u| !s.contains(u)).cloned().collect::<Vec<_>>());
    s
}

/// The serials `{ uhubctl = "auto" }` will look for: those of the id the lab file names,
/// as `tether::hubs::usb_serials` finds them.
fn id_serials(p: &FoundPhone) -> Vec<String> {
    match p.platform {
        Platform::Ios => hubs::iphone_usb_serials(&p.id),
        _ => hubs::android_usb_serials(&p.id),
    }
}

fn place(listing: Result<&Listing, ()>, serials: &[String], id_serials: &[String]) -> HubPlace {
    let Ok(listing) = listing else { return HubPlace::Unknown { why: "the host's hubs could not be read".into() } };
    if serials.is_empty() {
        return HubPlace::Unknown { why: "its USB serial is unknown until adb can read it".into() };
    }
    match hubs::locate(listing, serials) {
        Ok((location, port)) => {
            let auto = hubs::locate(listing, id_serials).is_ok_and(|at| at == (location.clone(), port));
            HubPlace::Switching { location, port, auto }
        }
        Err(why) => match serials.iter().flat_map(|s| listing.find_serial(s)).next() {
            Some((hub, port)) => {
                HubPlace::NotSwitching { location: hub.location.clone(), port: port.number, why: why.to_string() }
            }
            None => HubPlace::Unknown { why: "on no port of a hub uhubctl lists".into() },
        },
    }
}

fn phone(platform: Platform, id: &str, state: PhoneState) -> FoundPhone {
    FoundPhone {
        host: String::new(),
        platform,
        id: id.into(),
        usb_serial: None,
        model: None,
        os: None,
        os_short: None,
        label: None,
        state,
        hub: HubPlace::Unknown { why: String::new() },
        in_lab: None,
        problems: vec![],
    }
}

async fn android(transport: &Arc<dyn Transport>, opts: &DiscoverOptions) -> Result<Vec<FoundPhone>, LookError> {
    let server = opts.adb_server.as_ref();
    let listed = crate::device::android::list_attached(transport, server, opts.limit).await?;
    let mut out: Vec<(bool, FoundPhone)> = Vec::new();
    for entry in listed {
        let usb = entry.usb.is_some();
        let p = android_phone(transport, opts, entry).await;
        // One phone on the cable and on Wi-Fi adb is listed twice: keep one, the cable's.
        let key = |x: &FoundPhone| x.usb_serial.clone().unwrap_or_else(|| x.id.clone());
        match out.iter_mut().find(|(_, k)| key(k) == key(&p) && p.state == PhoneState::Ready) {
            Some(kept) if usb && !kept.0 => *kept = (usb, p),
            Some(_) => {}
            None => out.push((usb, p)),
        }
    }
    Ok(out.into_iter().map(|(_, p)| p).collect())
}

async fn android_phone(transport: &Arc<dyn Transport>, opts: &DiscoverOptions, entry: AdbEntry) -> FoundPhone {
    let s = entry.serial.as_str();
    let mut p = phone(Platform::Android, s, PhoneState::Ready);
    // adb's own model word (`Pixel_8`) until the phone says it.
    p.model = entry.model.as_ref().map(|m| m.replace('_', " "));
    match &entry.state {
        AdbState::Device => {
            let adb = Adb::new(transport.clone(), s, s, opts.adb_server.as_ref());
            match read_props(&adb, opts.limit).await {
                Ok(props) => {
                    p.model = Some(props.model.clone()).filter(|m| !m.is_empty()).or(p.model);
                    p.os = Some(format!("Android {} (SDK {})", props.release, props.sdk));
                    p.os_short = Some(format!("Android {}", props.release));
                    p.label = Some(props.manufacturer).filter(|m| !m.is_empty());
                    p.usb_serial = Some(props.serialno).filter(|x| !x.is_empty() && x != s);
                }
                Err(e) => {
                    p.state = PhoneState::Unreadable;
                    p.problems.push(e.to_string());
                }
            }
        }
        AdbState::Unauthorized => {
            p.state = PhoneState::Unauthorized;
            p.problems.push(unauthorized_fix(s));
        }
        AdbState::Offline => {
            p.state = PhoneState::Offline;
            p.problems.push(offline_fix(s));
        }
        AdbState::NoPermissions(said) => {
            p.state = PhoneState::Offline;
            p.problems.push(format!(
                "adb may not open phone {s} ({said}); fix: give the host's user access to it with a udev rule \
                 (Debian: `apt-get install android-sdk-platform-tools-common`), then replug it"
            ));
        }
        AdbState::Other(word) => {
            p.state = PhoneState::Offline;
            p.problems.push(format!("phone {s} is in state `{word}`, not running Android; fix: boot it into Android"));
        }
    }
    p
}

async fn iphones(
    host: &str,
    remote: bool,
    transport: &Arc<dyn Transport>,
    opts: &DiscoverOptions,
) -> Result<Vec<FoundPhone>, LookError> {
    // Over SSH this sets up a forward: bounded like every other call.
    let mux = bounded(opts.limit, "reaching usbmuxd", Mux::open(host, remote, transport, opts.usbmuxd.as_ref()))
        .await
        .map_err(|e| LookError::Usbmuxd(Box::new(e)))?;
    let listed = crate::device::ios::list_attached(&mux, host, opts.limit).await?;
    Ok(listed.into_iter().map(iphone).collect())
}

fn iphone(a: AttachedIphone) -> FoundPhone {
    let state = match a.state {
        IphoneState::Ready => PhoneState::Ready,
        IphoneState::NotPaired => PhoneState::NotPaired,
        IphoneState::Untrusted => PhoneState::Untrusted,
        IphoneState::Locked => PhoneState::Locked,
        IphoneState::DeveloperModeOff => PhoneState::DeveloperModeOff,
        IphoneState::Unreadable => PhoneState::Unreadable,
    };
    let mut p = phone(Platform::Ios, &a.udid, state);
    p.model = a.model;
    p.os = a.version.as_ref().map(|v| match &a.build {
        Some(b) => format!("iOS {v} ({b})"),
        None => format!("iOS {v}"),
    });
    p.os_short = a.version.map(|v| format!("iOS {v}"));
    p.label = a.name;
    p.problems.extend(a.problem);
    p
}

/// The monitors found, and notes on what could not be asked.
async fn monitors(
    host: &str,
    remote: bool,
    transport: &Arc<dyn Transport>,
    opts: &DiscoverOptions,
) -> (Vec<FoundMonitor>, Vec<String>) {
    let address = opts.otii.as_ref().map_or_else(|| OTII_DEFAULT.to_string(), |(h, p)| join_host_port(h, *p));
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    let monitor = |kind: &str, address: String, detail: String| FoundMonitor {
        host: host.into(),
        kind: kind.into(),
        address,
        detail,
        in_lab: None,
        problems: vec![],
    };
    match bounded(opts.limit, "the Otii server", async { probe_otii(transport, remote, &address, opts.limit).await })
        .await
    {
        Ok(Some(devices)) => {
            let mut m = monitor("otii", address.clone(), devices.join(", "));
            if devices.is_empty() {
                m.problems.push(
                    "the Otii server lists no Arc or Ace; fix: connect the instrument to that host's USB and open it in Otii 3"
                        .into(),
                );
            }
            out.push(m);
        }
        Ok(None) => {}
        Err(e) => notes.push(format!("Otii server at {address}: {e}")),
    }
    // A Monsoon is opened over USB by the lab's own process: only this machine's count.
    if !remote {
        match bounded(opts.limit, "listing USB devices", list_monsoons()).await {
            Ok(found) => out.extend(found.into_iter().map(|(serial, product)| monitor("monsoon", serial, product))),
            Err(e) => notes.push(format!("Monsoons not looked for: {e}")),
        }
    }
    (out, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Reply, ScriptedTransport};

    const HUBS: &str = "Current status for hub 1-1 [2109:2817 VIA Labs, Inc. USB2.0 Hub, USB 2.10, 4 ports, ppps]\n  \
        Port 1: 0503 power highspeed enable connect [18d1:4ee7 Google Pixel 8 3A1B2C]\n\
        Current status for hub 3-4 [1a40:0101 USB 2.0 Hub, USB 2.00, 4 ports, ganged]\n  \
        Port 3: 0503 power highspeed enable connect [18d1:4ee7 Google Pixel 7 28031FDH]\n";

    fn props(model: &str, serial: &str) -> Reply {
        let parts = [model, "Google", "14", "34", "google/x/x:14/A/1:user/release-keys", serial];
        Reply::ok(&format!(
            "{}__lab_exit=0\n",
            parts.iter().map(|p| format!("{p}\n@@lab-part@@\n")).collect::<String>()
        ))
    }

    fn opts() -> DiscoverOptions {
        DiscoverOptions {
            // Nothing answers at either: no iPhone or Otii on this scripted host.
            usbmuxd: Some(crate::config::UsbmuxdAddress::Socket("/nonexistent/usbmuxd".into())),
            otii: Some(("127.0.0.1".into(), 9)),
            limit: Duration::from_millis(500),
            ..DiscoverOptions::default()
        }
    }

    #[tokio::test]
    async fn each_phone_gets_its_port_and_a_ganged_hub_is_a_problem_with_its_fix() {
        let t = Arc::new(ScriptedTransport::new("shelf-1"));
        t.on(&["true"], vec![Reply::ok("")]);
        t.on(
            &["adb", "devices", "-l"],
            vec![Reply::ok("List of devices attached\n3A1B2C device usb:1-1 model:Pixel_8\n28031FDH device usb:3-4\n")],
        );
        t.on(&["adb", "-s", "3A1B2C", "shell"], vec![props("Pixel 8", "3A1B2C")]);
        t.on(&["adb", "-s", "28031FDH", "shell"], vec![props("Pixel 7", "28031FDH")]);
        t.on(&["uhubctl", "-f"], vec![Reply::ok(HUBS)]);
        let found = look("shelf-1", false, t.clone(), &opts()).await;
        assert_eq!(found.phones.len(), 2, "{found:?}");
        let (p8, p7) = (&found.phones[1], &found.phones[0]);
        assert_eq!((p8.model.as_deref(), p8.os_short.as_deref()), (Some("Pixel 8"), Some("Android 14")));
        assert_eq!(p8.hub, HubPlace::Switching { location: "1-1".into(), port: 1, auto: true });
        assert!(p8.problems.is_empty(), "{:?}", p8.problems);
        assert!(matches!(&p7.hub, HubPlace::NotSwitching { location, port: 3, .. } if location == "3-4"));
        assert!(
            p7.problems[0].starts_with("no per-port power switching: it is on hub 3-4 port 3"),
            "{:?}",
            p7.problems
        );
        assert!(p7.problems[0].contains("fix: move it to a hub with per-port power switching"));
        assert!(
            found.notes.iter().any(|n| n.starts_with("iPhones not looked for: usbmuxd does not answer")),
            "{:?}",
            found.notes
        );
        // Read-only: a listing of the hubs, getprop on the phones.
        assert_eq!(t.calls_of("uhubctl"), ["-f"]);
    }

    #[tokio::test]
    async fn a_phone_on_the_cable_and_on_wifi_adb_is_one_phone_and_wireless_debugging_gets_its_port_written() {
        let t = Arc::new(ScriptedTransport::new("shelf-1"));
        t.on(&["true"], vec![Reply::ok("")]);
        let wireless = "adb-3A1B2C-x._adb-tls-connect._tcp";
        t.on(
            &["adb", "devices", "-l"],
            vec![Reply::ok(&format!(
                "List of devices attached\n10.0.0.5:5555 device model:Pixel_8\n3A1B2C device usb:1-1 model:Pixel_8\n\
                 {wireless} device model:Pixel_7\n"
            ))],
        );
        t.on(&["adb", "-s", "10.0.0.5:5555", "shell"], vec![props("Pixel 8", "3A1B2C")]);
        t.on(&["adb", "-s", "3A1B2C", "shell"], vec![props("Pixel 8", "3A1B2C")]);
        t.on(&["adb", "-s", wireless, "shell"], vec![props("Pixel 7", "28031FDH")]);
        t.on(&["uhubctl", "-f"], vec![Reply::ok(&HUBS.replace("ganged", "ppps"))]);
        let found = look("shelf-1", false, t, &opts()).await;
        let ids: Vec<&str> = found.phones.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["3A1B2C", wireless]);
        assert_eq!(found.phones[0].hub, HubPlace::Switching { location: "1-1".into(), port: 1, auto: true });
        // On the hub by ro.serialno only: `auto` (which looks for adb's serial) would not find it.
        assert_eq!(found.phones[1].hub, HubPlace::Switching { location: "3-4".into(), port: 3, auto: false });
    }

    #[tokio::test]
    async fn a_hung_uhubctl_or_adb_is_a_note_within_the_limit_and_a_dead_host_is_unreachable() {
        let t = Arc::new(ScriptedTransport::new("shelf-1"));
        t.on(&["true"], vec![Reply::ok("")]);
        t.on(&["adb"], vec![Reply::ok("").after(Duration::from_secs(3600))]);
        t.on(&["uhubctl"], vec![Reply::ok("").after(Duration::from_secs(3600))]);
        let started = std::time::Instant::now();
        let found = look("shelf-1", false, t.clone(), &opts()).await;
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        assert!(
            found.notes.iter().any(|n| n.starts_with("Android phones not looked for: `adb devices -l` did not answer")),
            "{:?}",
            found.notes
        );
        assert!(
            found.notes.iter().any(|n| n.starts_with("uhubctl: ") && n.contains("within 500ms")),
            "{:?}",
            found.notes
        );

        t.set_unreachable(true);
        let found = look("shelf-1", true, t, &opts()).await;
        assert!(found.unreachable.unwrap().contains("fix: `lab hosts check` says more"));
        assert!(found.phones.is_empty() && found.notes.is_empty());
    }
}
