//! The services lockdownd starts on a port of their own (plain, no service TLS, as over
//! USB): the diagnostics relay, the image mounter and installation_proxy here, AFC in
//! afc.rs (also crash-report copy), Instruments' remote server in dvt.rs, the packet tap in pcapd.rs. Each is reached by a new usbmuxd Connect to the port StartService gave.

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use plist::{Dictionary, Value};
use sha2::{Digest, Sha256};

use crate::Server;
use crate::phone::{App, Fault, Phone};
use crate::wire::{self, dict, string};

pub const DIAGNOSTICS: &str = "com.apple.mobile.diagnostics_relay";
pub const IMAGE_MOUNTER: &str = "com.apple.mobile.mobile_image_mounter";
pub const AFC: &str = "com.apple.afc";
pub const INSTALLATION_PROXY: &str = "com.apple.mobile.installation_proxy";
pub const CRASH_MOVER: &str = "com.apple.crashreportmover";
pub const CRASH_COPY: &str = "com.apple.crashreportcopymobile";
const INSTRUMENTS: [&str; 2] =
    ["com.apple.instruments.remoteserver", "com.apple.instruments.remoteserver.DVTSecureSocketProxy"];
const CORE_DEVICE_PROXY: &str = crate::tunnel::SERVICE;

/// Whether the services the developer image brings run: Developer Mode on and the image
/// mounted (lockdown's instruments services, RSD's dtservicehub and CoreDevice services).
pub fn developer_services(phone: &Phone) -> bool {
    phone.developer_mode && phone.developer_image_mounted
}

/// Whether StartService gives a port for `service` (else InvalidService, as lockdownd
/// answers for a service the phone does not run now).
pub fn offered(phone: &Phone, service: &str) -> bool {
    match service {
        // pcapd needs no developer image (rvictl uses it on any phone over USB).
        DIAGNOSTICS | IMAGE_MOUNTER | AFC | INSTALLATION_PROXY | CRASH_MOVER | CRASH_COPY | crate::pcapd::SERVICE => {
            true
        }
        s if INSTRUMENTS.contains(&s) => developer_services(phone),
        // iOS 17+ runs it with Developer Mode on, the image mounted or not: hosts mount it
        // through the tunnel too (pymobiledevice3's `cryptex auto-install` "needs an RSD
        // tunnel"), and what needs the image is missing from RSD until then (rsd.rs).
        CORE_DEVICE_PROXY => {
            phone.major_version() >= 17 && phone.fault != Some(Fault::NoTunnel) && phone.developer_mode
        }
        _ => false,
    }
}

pub fn serve(stream: UnixStream, server: &Arc<Server>, udid: &str, service: &str) -> io::Result<()> {
    match service {
        DIAGNOSTICS => diagnostics(stream, server, udid),
        IMAGE_MOUNTER => image_mounter(stream, server, udid),
        AFC => crate::afc::serve(stream, server, udid, AFC, server.store.media(udid)),
        CRASH_COPY => crate::afc::serve(stream, server, udid, CRASH_COPY, server.store.crashes(udid)),
        CRASH_MOVER => crash_mover(stream, server, udid),
        INSTALLATION_PROXY => installation_proxy(stream, server, udid),
        s if INSTRUMENTS.contains(&s) => crate::dvt::serve(stream, server, udid),
        crate::pcapd::SERVICE => crate::pcapd::serve(stream, server, udid),
        CORE_DEVICE_PROXY => crate::tunnel::serve(stream, server, udid),
        // Offered but not modelled: the host sees the stream close.
        _ => {
            server.store.journal(udid, service, "connect", serde_json::json!({"modelled": false}));
            Ok(())
        }
    }
}

fn phone(server: &Server, udid: &str) -> io::Result<Phone> {
    server.store.phone(udid)?.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{udid} detached")))
}

/// The mover takes finished reports (a sysdiagnose among them) to where crash-report
/// copy sees them, then says "ping"; here they are written there already.
fn crash_mover(mut s: UnixStream, server: &Arc<Server>, udid: &str) -> io::Result<()> {
    server.store.journal(udid, CRASH_MOVER, "flush", serde_json::json!({}));
    s.write_all(b"ping")?;
    s.flush()
}

fn diagnostics(mut s: UnixStream, server: &Arc<Server>, udid: &str) -> io::Result<()> {
    while let Some(req) = wire::read_plist(&mut s)? {
        let request = string(&req, "Request").unwrap_or_default();
        let (class, name) = (string(&req, "EntryClass"), string(&req, "EntryName"));
        let args =
            serde_json::json!({"EntryClass": class, "EntryName": name, "CurrentPlane": string(&req, "CurrentPlane")});
        server.store.journal(udid, DIAGNOSTICS, &request, args);
        // The battery's entry is of class IOPMPowerSource and named AppleSmartBattery
        // (`idevicediagnostics ioregentry AppleSmartBattery` asks by name).
        let battery = class.as_deref() == Some("IOPMPowerSource") || name.as_deref() == Some("AppleSmartBattery");
        match request.as_str() {
            "IORegistry" => {
                let p = phone(server, udid)?;
                match p.ioregistry.filter(|_| battery) {
                    // The configured reply, byte for byte.
                    Some(path) => {
                        let bytes = std::fs::read(server.store.root().join(path))?;
                        s.write_all(&wire::plist_frame(&bytes))?;
                    }
                    None => wire::write_plist(&mut s, dict([("Status", "Failure".into())]))?,
                }
            }
            "Goodbye" => {
                wire::write_plist(&mut s, dict([("Status", "Success".into())]))?;
                return Ok(());
            }
            _ => wire::write_plist(&mut s, dict([("Status", "UnknownRequest".into())]))?,
        }
    }
    Ok(())
}

fn image_mounter(mut s: UnixStream, server: &Arc<Server>, udid: &str) -> io::Result<()> {
    while let Some(req) = wire::read_plist(&mut s)? {
        let command = string(&req, "Command").unwrap_or_default();
        let image_type = string(&req, "ImageType");
        server.store.journal(udid, IMAGE_MOUNTER, &command, serde_json::json!({"ImageType": image_type}));
        let p = phone(server, udid)?;
        let reply = match command.as_str() {
            "LookupImage" => {
                let mut r = dict([("Status", "Complete".into())]);
                // iOS 17+ mounts the Personalized image, older ones the Developer image.
                let wanted = if p.major_version() >= 17 { "Personalized" } else { "Developer" };
                if p.developer_image_mounted && image_type.as_deref() == Some(wanted) {
                    let signature = Sha256::digest(format!("{udid} {wanted}")).to_vec();
                    r.insert("ImageSignature".into(), Value::Array(vec![Value::Data(signature)]));
                }
                r
            }
            "QueryDeveloperModeStatus" => {
                dict([("DeveloperModeStatus", p.developer_mode.into()), ("Status", "Complete".into())])
            }
            "Hangup" => {
                wire::write_plist(&mut s, dict([("Status", "Complete".into())]))?;
                return Ok(());
            }
            _ => dict([("Error", "UnknownCommand".into())]),
        };
        wire::write_plist(&mut s, reply)?;
    }
    Ok(())
}

fn app_dict(app: &App) -> Value {
    Value::Dictionary(dict([
        ("ApplicationType", "User".into()),
        ("CFBundleIdentifier", app.bundle_id.clone().into()),
        ("CFBundleShortVersionString", app.short_version.clone().into()),
        ("CFBundleVersion", app.version.clone().into()),
    ]))
}

fn wanted_apps(server: &Server, udid: &str, options: Option<&Dictionary>) -> io::Result<Vec<App>> {
    let p = phone(server, udid)?;
    let kind = options.and_then(|o| string(o, "ApplicationType")).unwrap_or_else(|| "Any".into());
    let ids: Option<Vec<String>> = options
        .and_then(|o| o.get("BundleIDs"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_string().map(str::to_string)).collect());
    // Only user apps are modelled; a System lookup finds none of them.
    if !matches!(kind.as_str(), "Any" | "User") {
        return Ok(Vec::new());
    }
    let apps = server.store.apps(&p)?;
    Ok(apps.into_iter().filter(|a| ids.as_ref().is_none_or(|ids| ids.contains(&a.bundle_id))).collect())
}

fn installation_proxy(mut s: UnixStream, server: &Arc<Server>, udid: &str) -> io::Result<()> {
    while let Some(req) = wire::read_plist(&mut s)? {
        let command = string(&req, "Command").unwrap_or_default();
        let options = req.get("ClientOptions").and_then(Value::as_dictionary);
        match command.as_str() {
            "Lookup" => {
                let apps = wanted_apps(server, udid, options)?;
                let ids: Vec<&str> = apps.iter().map(|a| a.bundle_id.as_str()).collect();
                server.store.journal(udid, INSTALLATION_PROXY, "Lookup", serde_json::json!({"found": ids}));
                let result: Dictionary = apps.iter().map(|a| (a.bundle_id.clone(), app_dict(a))).collect();
                wire::write_plist(&mut s, dict([("LookupResult", result.into()), ("Status", "Complete".into())]))?;
            }
            "Browse" => {
                let apps = wanted_apps(server, udid, options)?;
                server.store.journal(udid, INSTALLATION_PROXY, "Browse", serde_json::json!({"count": apps.len()}));
                let list = Value::Array(apps.iter().map(app_dict).collect());
                wire::write_plist(
                    &mut s,
                    dict([
                        ("CurrentAmount", Value::Integer((apps.len() as u64).into())),
                        ("CurrentIndex", Value::Integer(0u64.into())),
                        ("CurrentList", list),
                        ("Status", "BrowsingApplications".into()),
                    ]),
                )?;
                wire::write_plist(&mut s, dict([("Status", "Complete".into())]))?;
            }
            "Install" | "Upgrade" => install(&mut s, server, udid, &command, &req)?,
            other => {
                server.store.journal(udid, INSTALLATION_PROXY, other, serde_json::json!({}));
                wire::write_plist(&mut s, dict([("Error", "UnknownCommand".into())]))?;
            }
        }
    }
    Ok(())
}

/// Reads the staged package from the AFC media folder, as installd does, and reports the
/// steps installd reports before `Complete`.
fn install(s: &mut UnixStream, server: &Arc<Server>, udid: &str, command: &str, req: &Dictionary) -> io::Result<()> {
    let package = string(req, "PackagePath").unwrap_or_default();
    let staged = crate::afc::resolve(&server.store.media(udid), &package);
    let bytes = staged.as_ref().and_then(|p| std::fs::read(p).ok());
    let sha = bytes.as_ref().map(|b| hex::encode(Sha256::digest(b)));
    let info = bytes.as_deref().map(crate::ipa::bundle_info);
    let app = match info {
        Some(Ok(app)) => app,
        failed => {
            let why = match failed {
                Some(Err(e)) => format!("Could not read the package: {e}"),
                _ => format!("Could not find {package}"),
            };
            server.store.journal(
                udid,
                INSTALLATION_PROXY,
                command,
                serde_json::json!({"PackagePath": package, "sha256": sha, "error": why}),
            );
            let reply = dict([("Error", "ApplicationVerificationFailed".into()), ("ErrorDescription", why.into())]);
            return wire::write_plist(s, reply);
        }
    };
    server.store.journal(
        udid,
        INSTALLATION_PROXY,
        command,
        serde_json::json!({"PackagePath": package, "sha256": sha, "CFBundleIdentifier": app.bundle_id,
            "CFBundleVersion": app.version, "ClientOptions": options_json(req)}),
    );
    for (step, pct) in [
        ("CreatingStagingDirectory", 5u64),
        ("ExtractingPackage", 15),
        ("InstallingApplication", 60),
        ("GeneratingApplicationMap", 90),
    ] {
        wire::write_plist(s, dict([("PercentComplete", Value::Integer(pct.into())), ("Status", step.into())]))?;
    }
    server.store.record_install(udid, app)?;
    wire::write_plist(s, dict([("Status", "Complete".into())]))
}

fn options_json(req: &Dictionary) -> serde_json::Value {
    let keys: Vec<String> = req
        .get("ClientOptions")
        .and_then(Value::as_dictionary)
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    serde_json::json!(keys)
}
