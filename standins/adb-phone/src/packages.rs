//! `pm` / `cmd package` (install from a file or streamed, install sessions, path, list,
//! uninstall, clear, grant) and `am` / `cmd activity` (start -W, force-stop), with the
//! messages PackageManagerShellCommand and ActivityManagerShellCommand print.
//!
//! The package name comes from the APK's bytes: the first `package="…"` in them, as in a
//! plain-text AndroidManifest.xml stored in the zip (binary XML is not read), and a
//! `split="…"` marks a split. Bytes with no package name fail as a real phone fails on a
//! file that is not an APK.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::commands::Io;
use crate::framework::on_phone;
use crate::phone::{Extra, Launch, Package, Phone, Process, Session};
use crate::store::Store;

pub fn run(store: &Store, name: &str, args: &[String], io: &mut Io) -> Option<i32> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match name {
        "pm" => Some(pm(store, &args, io)),
        "am" => Some(am(store, &args, io)),
        _ => None,
    }
}

fn random_name() -> String {
    let mut bytes = [0u8; 16];
    if let Ok(mut f) = fs::File::open("/dev/urandom") {
        let _ = f.read_exact(&mut bytes);
    }
    format!("{}==", URL_SAFE_NO_PAD.encode(bytes))
}

/// The value of `attr="…"` in `bytes`, if any.
fn attribute(bytes: &[u8], attr: &str) -> Option<String> {
    let needle = format!("{attr}=\"");
    let at = bytes.windows(needle.len()).position(|w| w == needle.as_bytes())? + needle.len();
    let end = bytes[at..].iter().position(|b| *b == b'"')?;
    let value = std::str::from_utf8(&bytes[at..at + end]).ok()?;
    let valid = !value.is_empty() && value.chars().all(|c| c.is_ascii_alphanumeric() || "._".contains(c));
    valid.then(|| value.to_string())
}

/// Installs `apks` (name, bytes); "Success" or the Failure line.
fn install(store: &Store, p: &mut Phone, apks: &[(String, Vec<u8>)], session: u32) -> String {
    let staged = format!("/data/app/vmdl{session}.tmp");
    let mut package = None;
    let mut files = Vec::new();
    for (name, bytes) in apks {
        match (attribute(bytes, "package"), attribute(bytes, "split")) {
            (Some(pkg), split) => {
                if package.as_ref().is_some_and(|p| *p != pkg) {
                    return format!("Failure [INSTALL_FAILED_INVALID_APK: Split {name} package {pkg} inconsistent]");
                }
                package = Some(pkg);
                files.push((split.map_or("base.apk".to_string(), |s| format!("split_{s}.apk")), bytes));
            }
            (None, _) => {
                return format!(
                    "Failure [INSTALL_PARSE_FAILED_NOT_APK: Failed to parse {staged}/{name}: Failed to read manifest from {staged}/{name}]"
                );
            }
        }
    }
    let Some(package) = package else { return "Failure [INSTALL_FAILED_INVALID_APK: no APKs]".into() };
    if !files.iter().any(|(n, _)| n == "base.apk") {
        return format!("Failure [INSTALL_FAILED_MISSING_SPLIT: Missing split for {package}]");
    }
    files.sort_by_key(|(n, _)| n != "base.apk");
    let dir = format!("/data/app/~~{}/{package}-{}", random_name(), random_name());
    let host_dir = store.host_path(&dir);
    if fs::create_dir_all(&host_dir).is_err() {
        return "Failure [INSTALL_FAILED_INSUFFICIENT_STORAGE]".into();
    }
    for (name, bytes) in &files {
        if fs::write(host_dir.join(name), bytes).is_err() {
            return "Failure [INSTALL_FAILED_INSUFFICIENT_STORAGE]".into();
        }
    }
    // An update kills the app and replaces its folder; the uid stays.
    p.stop_package(&package);
    let uid = match p.packages.get(&package) {
        Some(old) => {
            if let Some(parent) = store.host_path(&old.dir).parent() {
                let _ = fs::remove_dir_all(parent);
            }
            old.uid
        }
        None => {
            p.next_uid += 1;
            p.next_uid
        }
    };
    let apks = files.into_iter().map(|(n, _)| n).collect();
    p.packages.insert(package, Package { uid, dir, apks, cpu_share: 0.25, cold_start_ms: 480, pss_kb: 58_000 });
    "Success".into()
}

fn read_exactly(io: &mut Io, size: usize) -> Option<Vec<u8>> {
    let mut bytes = vec![0u8; size];
    io.stdin.read_exact(&mut bytes).ok()?;
    Some(bytes)
}

/// `-S SIZE` among `args`, and the arguments that are neither options nor their values.
fn size_and_operands<'a>(args: &[&'a str]) -> (Option<usize>, Vec<&'a str>) {
    let (mut size, mut operands) = (None, Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "-S" => size = it.next().and_then(|s| s.parse().ok()),
            // Options that take a value.
            "-i" | "--user" | "-p" | "--install-reason" | "--originating-uri" | "--referrer" | "--abi" => {
                it.next();
            }
            o if o.starts_with('-') && o != "-" => {}
            o => operands.push(o),
        }
    }
    (size, operands)
}

pub fn pm(store: &Store, args: &[&str], io: &mut Io) -> i32 {
    let Some((verb, rest)) = args.split_first() else {
        io.warn("usage: pm path|list|install|install-create|install-write|install-commit|uninstall|clear ...");
        return 1;
    };
    let (size, operands) = size_and_operands(rest);
    match *verb {
        "install" => {
            let apk = match (size, operands.first()) {
                (Some(size), None) => read_exactly(io, size).map(|b| ("base.apk".to_string(), b)),
                (_, Some(path)) => {
                    fs::read(store.host_path(path)).ok().map(|b| (path.rsplit('/').next().unwrap().to_string(), b))
                }
                (None, None) => {
                    io.warn("Error: must either specify a package size or an APK file");
                    return 255;
                }
            };
            let Some(apk) = apk else {
                io.warn("Error: failed to read the APK");
                return 255;
            };
            on_phone(store, io, |p, io| {
                p.next_session += 1;
                let outcome = install(store, p, &[apk], p.next_session);
                report(io, outcome)
            })
        }
        "install-create" => on_phone(store, io, |p, io| {
            p.next_session += 7;
            p.sessions.insert(p.next_session, Session { files: Vec::new() });
            io.say(format!("Success: created install session [{}]", p.next_session));
            0
        }),
        "install-write" => {
            let (Some(session), Some(name)) = (operands.first().and_then(|s| s.parse::<u32>().ok()), operands.get(1))
            else {
                io.warn("Error: usage: install-write [-S BYTES] SESSION_ID SPLIT_NAME [PATH|-]");
                return 255;
            };
            let bytes = match (operands.get(2), size) {
                (Some(path), _) if *path != "-" => fs::read(store.host_path(path)).ok(),
                (_, Some(size)) => read_exactly(io, size),
                (_, None) => Some(io.stdin_bytes()),
            };
            let Some(bytes) = bytes else {
                io.warn("Error: the APK was cut short");
                return 255;
            };
            let file = store.root().join("sessions").join(format!("{session}-{name}"));
            let _ = fs::create_dir_all(store.root().join("sessions"));
            if fs::write(&file, &bytes).is_err() {
                io.warn("Error: no space left");
                return 255;
            }
            let n = bytes.len();
            let name = name.to_string();
            on_phone(store, io, |p, io| match p.sessions.get_mut(&session) {
                Some(s) => {
                    s.files.push((name, file.display().to_string()));
                    io.say(format!("Success: streamed {n} bytes"));
                    0
                }
                None => {
                    io.warn(format!("Exception occurred while executing 'install-write':\njava.lang.SecurityException: Caller has no access to session {session}"));
                    255
                }
            })
        }
        "install-commit" | "install-abandon" => {
            let Some(session) = operands.first().and_then(|s| s.parse::<u32>().ok()) else {
                io.warn(format!("Error: usage: {verb} SESSION_ID"));
                return 255;
            };
            let commit = *verb == "install-commit";
            on_phone(store, io, |p, io| {
                let Some(s) = p.sessions.remove(&session) else {
                    io.warn(format!("Exception occurred while executing '{verb}':\njava.lang.SecurityException: Caller has no access to session {session}"));
                    return 255;
                };
                let apks: Vec<(String, Vec<u8>)> =
                    s.files.iter().map(|(name, file)| (name.clone(), fs::read(file).unwrap_or_default())).collect();
                for (_, file) in &s.files {
                    let _ = fs::remove_file(file);
                }
                if !commit {
                    io.say("Success");
                    return 0;
                }
                let outcome = install(store, p, &apks, session);
                report(io, outcome)
            })
        }
        "path" => on_phone(store, io, |p, io| match operands.first().and_then(|n| p.packages.get(*n)) {
            Some(pkg) => {
                for apk in &pkg.apks {
                    io.say(format!("package:{}/{apk}", pkg.dir));
                }
                0
            }
            None => 1,
        }),
        "list" if operands.first() == Some(&"packages") => on_phone(store, io, |p, io| {
            let filter = operands.get(1).copied().unwrap_or("");
            for name in p.packages.keys().filter(|n| n.contains(filter)) {
                io.say(format!("package:{name}"));
            }
            0
        }),
        "uninstall" => on_phone(store, io, |p, io| {
            match operands.first().and_then(|n| p.packages.remove(*n).map(|pkg| (n, pkg))) {
                Some((name, pkg)) => {
                    p.stop_package(name);
                    if let Some(parent) = store.host_path(&pkg.dir).parent() {
                        let _ = fs::remove_dir_all(parent);
                    }
                    io.say("Success");
                    0
                }
                None => {
                    io.say("Failure [DELETE_FAILED_INTERNAL_ERROR]");
                    1
                }
            }
        }),
        "clear" => on_phone(store, io, |p, io| {
            if operands.first().is_some_and(|n| p.packages.contains_key(*n)) {
                p.stop_package(operands[0]);
                io.say("Success");
                0
            } else {
                io.say("Failed");
                1
            }
        }),
        "grant" | "revoke" => on_phone(store, io, |p, io| match operands.first() {
            Some(n) if p.packages.contains_key(*n) => 0,
            n => {
                io.warn(format!(
                    "Exception occurred while executing '{verb}':\njava.lang.IllegalArgumentException: Unknown package: {}",
                    n.unwrap_or(&"")
                ));
                255
            }
        }),
        other => {
            io.warn(format!("Unknown command: {other}"));
            255
        }
    }
}

fn report(io: &mut Io, outcome: String) -> i32 {
    let ok = outcome == "Success";
    if ok {
        io.say(outcome);
        0
    } else {
        io.warn(outcome);
        1
    }
}

/// `PKG/.Act` → (package, full class name).
fn component(spec: &str) -> Option<(String, String)> {
    let (pkg, class) = spec.split_once('/')?;
    let class = if class.starts_with('.') { format!("{pkg}{class}") } else { class.to_string() };
    Some((pkg.to_string(), class))
}

/// ComponentName.flattenToShortString: the class relative to the package when it can be.
fn short(pkg: &str, class: &str) -> String {
    match class.strip_prefix(pkg) {
        Some(rest) if rest.starts_with('.') => format!("{pkg}/{rest}"),
        _ => format!("{pkg}/{class}"),
    }
}

#[derive(Debug)]
struct Start {
    wait: bool,
    stop: bool,
    action: Option<String>,
    categories: Vec<String>,
    component: Option<(String, String)>,
    extras: BTreeMap<String, Extra>,
}

fn parse_start(args: &[&str]) -> Result<Start, String> {
    let mut s = Start {
        wait: false,
        stop: false,
        action: None,
        categories: Vec::new(),
        component: None,
        extras: BTreeMap::new(),
    };
    let mut it = args.iter();
    let number = |kind: &str, v: &str| format!("java.lang.NumberFormatException: For input string: \"{v}\" ({kind})");
    while let Some(a) = it.next() {
        let mut value =
            || it.next().map(|v| v.to_string()).ok_or_else(|| format!("Error: No argument supplied for {a}"));
        match *a {
            "-W" => s.wait = true,
            "-S" => s.stop = true,
            "-n" => {
                let v = value()?;
                s.component = Some(
                    component(&v)
                        .ok_or_else(|| format!("java.lang.IllegalArgumentException: Bad component name: {v}"))?,
                );
            }
            "-a" => s.action = Some(value()?),
            "-c" => s.categories.push(value()?),
            "--user" => {
                value()?;
            }
            "--es" | "--ei" | "--el" | "--ez" | "--ef" => {
                let key = value()?;
                let v = value()?;
                let extra = match *a {
                    "--es" => Extra::String(v),
                    "--ei" => Extra::Int(v.parse().map_err(|_| number("int", &v))?),
                    "--el" => Extra::Long(v.parse().map_err(|_| number("long", &v))?),
                    "--ef" => Extra::Float(v.parse().map_err(|_| number("float", &v))?),
                    _ => Extra::Bool(match v.as_str() {
                        "true" | "t" | "1" => true,
                        "false" | "f" | "0" => false,
                        _ => return Err(format!("java.lang.IllegalArgumentException: Invalid boolean value: {v}")),
                    }),
                };
                s.extras.insert(key, extra);
            }
            other => return Err(format!("Error: Unknown option: {other}")),
        }
    }
    Ok(s)
}

/// Intent.toString as `am start` prints it (before it adds FLAG_ACTIVITY_NEW_TASK).
fn intent_text(s: &Start) -> String {
    let mut parts = Vec::new();
    if let Some(a) = &s.action {
        parts.push(format!("act={a}"));
    }
    if !s.categories.is_empty() {
        parts.push(format!("cat=[{}]", s.categories.join(",")));
    }
    if let Some((pkg, class)) = &s.component {
        parts.push(format!("cmp={}", short(pkg, class)));
    }
    if !s.extras.is_empty() {
        parts.push("(has extras)".into());
    }
    format!("Intent {{ {} }}", parts.join(" "))
}

pub fn am(store: &Store, args: &[&str], io: &mut Io) -> i32 {
    match args {
        ["start" | "start-activity", rest @ ..] => {
            let start = match parse_start(rest) {
                Ok(s) => s,
                Err(e) if e.starts_with("Error") => {
                    io.warn(e);
                    return 255;
                }
                Err(e) => {
                    io.warn("Exception occurred while executing 'start':");
                    io.warn(e);
                    return 255;
                }
            };
            on_phone(store, io, |p, io| start_activity(p, &start, io))
        }
        ["force-stop", rest @ ..] => match rest.iter().rfind(|a| !a.starts_with('-')) {
            Some(pkg) => on_phone(store, io, |p, _| {
                p.stop_package(pkg);
                0
            }),
            None => {
                io.warn("Exception occurred while executing 'force-stop':\njava.lang.IllegalArgumentException: Argument expected after \"force-stop\"");
                255
            }
        },
        [verb, ..] => {
            io.warn(format!("Unknown command: {verb}"));
            255
        }
        [] => {
            io.warn("Activity manager (activity) commands: start, force-stop");
            255
        }
    }
}

fn start_activity(p: &mut Phone, s: &Start, io: &mut Io) -> i32 {
    let Some((pkg, class)) = &s.component else {
        io.warn(format!("Error: Activity not started, unable to resolve {}", intent_text(s)));
        return 0;
    };
    let out: fn(&mut Io, String) = if s.wait { |io, l| io.say(l) } else { |io, l| io.warn(l) };
    if s.stop {
        io.say(format!("Stopping: {pkg}"));
        p.stop_package(pkg);
    }
    io.say(format!("Starting: {}", intent_text(s)));
    let Some(installed) = p.packages.get(pkg) else {
        out(io, "Error type 3".into());
        out(io, format!("Error: Activity class {{{pkg}/{class}}} does not exist."));
        return 0;
    };
    let cold_ms = installed.cold_start_ms;
    let name = short(pkg, class);
    let running = !p.pids_of(pkg).is_empty();
    let (state, total) = if running && p.resumed == name {
        out(io, "Warning: Activity not started, its current task has been brought to the front".into());
        ("HOT", cold_ms / 8)
    } else if running {
        ("WARM", cold_ms / 3)
    } else {
        let now = p.now_ms;
        p.spawn(Process::App { package: pkg.clone(), started_ms: now });
        ("COLD", cold_ms)
    };
    p.resumed = name.clone();
    p.launches.push(Launch { component: name.clone(), extras: s.extras.clone(), at_ms: p.now_ms });
    if s.wait {
        io.say("Status: ok");
        io.say(format!("LaunchState: {state}"));
        io.say(format!("Activity: {name}"));
        io.say(format!("TotalTime: {total}"));
        io.say(format!("WaitTime: {}", total + 14));
        io.say("Complete");
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_print_as_android_shortens_them() {
        let (pkg, class) = component("com.x/.Main").unwrap();
        assert_eq!((pkg.as_str(), class.as_str()), ("com.x", "com.x.Main"));
        assert_eq!(short("com.x", "com.x.ui.Main"), "com.x/.ui.Main");
        assert_eq!(short("com.x", "org.y.Main"), "com.x/org.y.Main");
    }

    #[test]
    fn intents_name_their_parts_in_androids_order() {
        let s = parse_start(&["-W", "-n", "com.x/.Main", "-a", "A", "--ei", "n", "3"]).unwrap();
        assert_eq!(intent_text(&s), "Intent { act=A cmp=com.x/.Main (has extras) }");
        assert!(parse_start(&["--ei", "n", "three"]).unwrap_err().contains("NumberFormatException"));
    }

    #[test]
    fn the_package_name_is_read_from_the_manifest_text() {
        assert_eq!(
            attribute(b"PK..<manifest package=\"com.x.y\" split=\"config.en\">", "package").as_deref(),
            Some("com.x.y")
        );
        assert_eq!(attribute(b"random bytes", "package"), None);
    }
}
