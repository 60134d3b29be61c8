//! The platform sections of a `[[device]]`: `[device.sim]`, `[device.android]` and
//! `[device.ios]`, each required on its platform and refused on the others, into a
//! [`DeviceKind`]. The removed `ids` key gets an error that says where its value went.

use std::path::{Path, PathBuf};

use crate::config::lab::read_sim::read_sim;
use crate::config::syntax::address::parse_host_port;
use crate::config::syntax::files::existing_file;
use crate::config::syntax::problems::Problems;
use crate::config::syntax::suggest::closest;
use crate::config::syntax::table::{Field, Table};
use crate::config::{AdbServer, AndroidDevice, DeviceKind, IosDevice, IosSample, Platform, UsbmuxdAddress};

/// The device keys this file reads.
pub(crate) const SECTION_KEYS: &[&str] = &["sim", "android", "ios"];
/// `ids` was replaced by the sections; it is reported here, never suggested for a typo.
pub(crate) const REMOVED_KEYS: &[&str] = &["ids"];
const ANDROID_KEYS: &[&str] = &["serial", "adb_server", "perfetto"];
const IOS_KEYS: &[&str] = &["udid", "usbmuxd", "pair_record", "samples"];
const SERIAL_EXAMPLE: &str = "serial = \"0A1B2C3D\"";
const UDID_EXAMPLE: &str = "udid = \"00008020-001A2B3C4D5E6F7A\"";

/// The section every platform that has one needs, and how to start it.
fn own_section(platform: Platform) -> Option<(&'static str, &'static str)> {
    match platform {
        Platform::Sim => Some(("sim", "`emulates = \"ios\"` (or \"android\")")),
        Platform::Android => Some(("android", "`serial = \"...\"` (the serial `adb devices` lists)")),
        Platform::Ios => Some(("ios", "`udid = \"...\"` (the UDID `idevice_id -l` lists)")),
        Platform::Host => None,
    }
}

fn article(platform: Platform) -> &'static str {
    match platform {
        Platform::Android | Platform::Ios => "an",
        Platform::Sim | Platform::Host => "a",
    }
}

/// Reads the device's platform section; `None` after reporting when it is missing, on
/// the wrong platform, or wrong inside. With an unknown platform only `ids` is checked.
pub(crate) fn read_kind(t: &Table, p: &mut Problems, platform: Option<Platform>, base: &Path) -> Option<DeviceKind> {
    let before = p.len();
    let ids = t.get("ids");
    if let Some(f) = &ids {
        replaced_ids(f, p, platform);
    }
    let platform = platform?;
    let own = own_section(platform);
    for key in SECTION_KEYS.iter().filter(|k| own.is_none_or(|(o, _)| o != **k)) {
        if let Some(f) = t.get(key) {
            f.problem(
                p,
                format!(
                    "a [device.{key}] table is only allowed on {key} devices; this device is platform \"{platform}\""
                ),
                format!("remove the [device.{key}] table, or set platform = \"{key}\""),
            );
        }
    }
    let kind = match (own, t.get(own.map_or("", |(k, _)| k))) {
        (None, _) => Some(DeviceKind::Host),
        (Some((key, start)), None) => {
            // An `ids` key already said where its value goes.
            if ids.is_none() {
                p.push(
                    t.span(),
                    &format!("{}.{key}", t.path()),
                    format!("{} {platform} device needs a [device.{key}] table", article(platform)),
                    format!("add `[device.{key}]` with {start} after this device's keys"),
                );
            }
            None
        }
        (Some(_), Some(f)) => {
            let st = f.table(p)?;
            match platform {
                Platform::Sim => read_sim(&st, p).map(DeviceKind::Sim),
                Platform::Android => read_android(&st, p).map(DeviceKind::Android),
                Platform::Ios => read_ios(&st, p, base).map(DeviceKind::Ios),
                Platform::Host => unreachable!("a host device has no section"),
            }
        }
    };
    kind.filter(|_| p.len() == before)
}

/// `ids = { serial = "…" }` → `[device.android] serial`, `ids.udid` → `[device.ios] udid`.
fn replaced_ids(f: &Field, p: &mut Problems, platform: Option<Platform>) {
    // The value, when it can be read, so the fix can be pasted.
    let written = |key: &str| {
        f.item.as_table_like().and_then(|t| t.get(key)).and_then(|v| v.as_str()).map(|v| format!("{key} = {v:?}"))
    };
    let (message, fix) = match platform {
        Some(Platform::Android) => (
            "`ids` was replaced by `[device.android] serial`".to_string(),
            format!(
                "remove `ids` and add `[device.android]` with `{}` after this device's keys",
                written("serial").unwrap_or(SERIAL_EXAMPLE.into())
            ),
        ),
        Some(Platform::Ios) => (
            "`ids` was replaced by `[device.ios] udid`".to_string(),
            format!(
                "remove `ids` and add `[device.ios]` with `{}` after this device's keys",
                written("udid").unwrap_or(UDID_EXAMPLE.into())
            ),
        ),
        Some(pl @ (Platform::Sim | Platform::Host)) => (
            format!("`ids` was removed; {} {pl} device has no platform identifiers", article(pl)),
            "remove `ids` (a simulated phone's serial is `sim-<seed in hex>`)".to_string(),
        ),
        None => (
            "`ids` was replaced by `[device.android] serial` and `[device.ios] udid`".to_string(),
            "remove `ids` and write the identifier in the section of the device's platform".to_string(),
        ),
    };
    f.key_problem(p, message, fix);
}

/// What names a phone of one platform: the key, what it is, where it is seen.
struct Identifier {
    key: &'static str,
    phone: &'static str,
    noun: &'static str,
    a_noun: &'static str,
    listed_by: &'static str,
    example: &'static str,
    valid: fn(&str) -> bool,
    rule: &'static str,
}

const SERIAL: Identifier = Identifier {
    key: "serial",
    phone: "an Android phone",
    noun: "adb serial",
    a_noun: "an adb serial",
    listed_by: "`adb devices`",
    example: SERIAL_EXAMPLE,
    valid: is_serial,
    rule: "one word of visible ASCII, no quotes",
};
const UDID: Identifier = Identifier {
    key: "udid",
    phone: "an iPhone",
    noun: "UDID",
    a_noun: "a UDID",
    listed_by: "`idevice_id -l`",
    example: UDID_EXAMPLE,
    valid: is_udid,
    rule: "letters, digits and `-` only",
};

/// The section's identifier `own`; the other platform's key `other` is refused, pointing
/// at `own`, and then a missing `own` is the same problem, not a second one.
fn read_identifier(t: &Table, p: &mut Problems, own: &Identifier, other: &Identifier) -> Option<String> {
    let misplaced = t.get(other.key);
    if let Some(f) = &misplaced {
        f.key_problem(
            p,
            format!("`{}` names {}; {} is named by its {}", other.key, other.phone, own.phone, own.noun),
            format!("write `{}` (the {} {} lists) instead", own.example, own.noun, own.listed_by),
        );
    }
    if misplaced.is_some() && t.get(own.key).is_none() {
        return None;
    }
    let f = t.required(p, own.key, own.example)?;
    let text = f.text(p)?;
    if (own.valid)(&text) {
        return Some(text);
    }
    f.problem(
        p,
        format!("\"{text}\" is not {} ({})", own.a_noun, own.rule),
        format!("write it as {} lists it, e.g. `{}`", own.listed_by, own.example),
    );
    None
}

fn read_android(t: &Table, p: &mut Problems) -> Option<AndroidDevice> {
    t.check_keys_except(p, ANDROID_KEYS, &[UDID.key]);
    let serial = read_identifier(t, p, &SERIAL, &UDID);
    let adb_server = match t.get("adb_server") {
        None => Some(None),
        Some(f) => {
            let text = f.text(p)?;
            match parse_host_port(&text, None) {
                Ok((host, port)) => Some(Some(AdbServer { host, port })),
                Err(why) => {
                    f.problem(
                        p,
                        format!("\"{text}\" is not a host and port: {why}"),
                        "write `adb_server = \"127.0.0.1:5037\"` (the adb server as the device's host reaches it)",
                    );
                    None
                }
            }
        }
    };
    let perfetto = match t.get("perfetto") {
        None => Some(false),
        Some(f) => f.bool(p),
    };
    Some(AndroidDevice { serial: serial?, adb_server: adb_server?, perfetto: perfetto? })
}

fn read_ios(t: &Table, p: &mut Problems, base: &Path) -> Option<IosDevice> {
    t.check_keys_except(p, IOS_KEYS, &[SERIAL.key]);
    let udid = read_identifier(t, p, &UDID, &SERIAL);
    let usbmuxd = match t.get("usbmuxd") {
        None => Some(None),
        Some(f) => read_usbmuxd(&f, p).map(Some),
    };
    // A copy of the host's pair record, for a host whose usbmuxd keeps none (or another one).
    let pair_record = match t.get("pair_record") {
        None => Some(None),
        Some(f) => existing_file(&f, p, base, "pair record").map(|(path, _)| Some(path)),
    };
    let samples = match t.get("samples") {
        None => Some(Vec::new()),
        Some(f) => read_samples(&f, p),
    };
    Some(IosDevice { udid: udid?, usbmuxd: usbmuxd?, pair_record: pair_record?, samples: samples? })
}

/// `samples = ["energy", "cpu", "packets"]`: each known, duplicates dropped, kept in order.
fn read_samples(f: &Field, p: &mut Problems) -> Option<Vec<IosSample>> {
    let mut out = Vec::new();
    let mut ok = true;
    for (i, (name, span)) in f.strings(p)?.into_iter().enumerate() {
        match IosSample::from_name(&name) {
            Some(s) if !out.contains(&s) => out.push(s),
            Some(_) => {}
            None => {
                let fix = match closest(&name, &IosSample::NAMES) {
                    Some(c) => format!("did you mean \"{c}\"?"),
                    None => "use \"energy\", \"cpu\" or \"packets\"".to_string(),
                };
                p.push(span, &format!("{}[{i}]", f.path), format!("unknown sample \"{name}\""), fix);
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

/// `"/var/run/usbmuxd"` (a socket on the device's host) or `"127.0.0.1:27015"`.
fn read_usbmuxd(f: &Field, p: &mut Problems) -> Option<UsbmuxdAddress> {
    let text = f.text(p)?;
    let fix = "write `usbmuxd = \"/var/run/usbmuxd\"` (a socket on the device's host) or \
               `usbmuxd = \"127.0.0.1:27015\"` (a TCP forward to usbmuxd)";
    if text.starts_with('/') {
        return Some(UsbmuxdAddress::Socket(PathBuf::from(text)));
    }
    if !text.contains(':') {
        f.problem(p, format!("\"{text}\" is neither an absolute socket path nor a host and port"), fix);
        return None;
    }
    match parse_host_port(&text, None) {
        Ok((host, port)) => Some(UsbmuxdAddress::Tcp { host, port }),
        Err(why) => {
            f.problem(p, format!("\"{text}\" is not a host and port: {why}"), fix);
            None
        }
    }
}

/// adb prints serials as one word of visible ASCII (`emulator-5554`, `192.168.1.7:5555`).
fn is_serial(s: &str) -> bool {
    s.chars().all(|c| c.is_ascii_graphic() && c != '"' && c != '\'')
}

/// UDIDs are hex digits, with a `-` in newer ones (`00008020-001A2B3C4D5E6F7A`).
fn is_udid(s: &str) -> bool {
    s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}
