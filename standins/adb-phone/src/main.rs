//! `adb-phone`: the device side of adb, for tests that drive the real adb client and
//! server with no phone attached. It speaks the adb transport (CNXN, AUTH, OPEN, OKAY,
//! WRTE, CLSE) on TCP, as `adb connect` expects of a phone with adb over Wi-Fi, and
//! answers its services — `shell,v2`, `shell`, `exec`, `sync` — from a small phone model.
//!
//! ```text
//! adb-phone --listen 127.0.0.1:PORT --root DIR [--auth accept|never] [--legacy] [--serial S]
//! adb-phone power DIR none|usb|ac
//! ```
//!
//! It prints `listening ADDR` on stdout once it accepts connections, and serves any number
//! of them (each on its own thread). All its state is in DIR, so a stand-in started again
//! on the same DIR is the same phone. `--auth` asks the host to authenticate (`accept`
//! allows any host that offers its key, `never` leaves it `unauthorized`); without it the
//! phone is like one with `ro.adb.secure=0`. `--legacy` advertises no features, as a phone
//! from before Android 7 (no shell_v2: no exit status, stderr mixed into stdout).
//! `power` plugs or unplugs the phone in DIR at this moment (a stand-in hub or a test
//! does, so the battery and its history change when the power does).
//! Pick a port outside 5555–5585, which the adb server scans for emulators.
//! docs/platforms/android.md says what is modelled and what each command answers.

mod auth;
mod commands;
mod framework;
mod packages;
mod phone;
mod shell;
mod store;
mod streams;
mod sync;
mod toolbox;
mod trace;
mod wire;

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use auth::{Auth, AuthMode, Verdict};
use store::Store;
use streams::{Event, Link, Streams};
use wire::{
    A_AUTH, A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_VERSION, A_WRTE, AUTH_RSAPUBLICKEY, AUTH_SIGNATURE, AUTH_TOKEN,
    MAX_PAYLOAD, Message,
};

const USAGE: &str = "usage: adb-phone --listen 127.0.0.1:PORT --root DIR [--auth accept|never] [--legacy] [--serial S]";

/// What adbd would advertise that this phone implements (a Pixel also says ls_v2, abb,
/// abb_exec, sendrecv_v2 and more; without abb_exec, `adb install` uses `exec:cmd`).
const FEATURES: &str = "shell_v2,cmd,stat_v2,fixed_push_mkdir,fixed_push_symlink_timestamp";

struct Phone {
    store: Store,
    auth: AuthMode,
    legacy: bool,
}

struct Args {
    listen: String,
    root: PathBuf,
    auth: AuthMode,
    legacy: bool,
    serial: String,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut listen, mut root, mut auth, mut legacy, mut serial) = (None, None, AuthMode::Off, false, None);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--listen" => listen = Some(value()?),
            "--root" => root = Some(PathBuf::from(value()?)),
            "--serial" => serial = Some(value()?),
            "--legacy" => legacy = true,
            "--auth" => {
                auth = match value()?.as_str() {
                    "accept" => AuthMode::Accept,
                    "never" => AuthMode::Never,
                    other => return Err(format!("--auth {other}: use accept or never")),
                }
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Args {
        listen: listen.ok_or("--listen is required")?,
        root: root.ok_or("--root is required")?,
        auth,
        legacy,
        serial: serial.unwrap_or_else(|| "0A281FDD4000AE".to_string()),
    })
}

/// `adb-phone power DIR none|usb|ac`.
fn power(args: &[String]) -> ExitCode {
    let to = match args {
        [_, _, to] if to == "none" => phone::Power::None,
        [_, _, to] if to == "usb" => phone::Power::Usb,
        [_, _, to] if to == "ac" => phone::Power::Ac,
        _ => {
            eprintln!("usage: adb-phone power DIR none|usb|ac");
            return ExitCode::from(2);
        }
    };
    let root = PathBuf::from(&args[1]);
    match Store::open(&root, "").and_then(|s| s.update(|p| p.battery.power = to)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("adb-phone: {}: {e}", root.display());
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().is_some_and(|a| a == "power") {
        return power(&argv);
    }
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("adb-phone: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let started = std::fs::create_dir_all(&args.root).and_then(|()| Store::open(&args.root, &args.serial));
    let store = match started {
        Ok(s) => s,
        Err(e) => {
            eprintln!("adb-phone: {}: {e}", args.root.display());
            return ExitCode::FAILURE;
        }
    };
    let listener = match TcpListener::bind(&args.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("adb-phone: listen on {}: {e}", args.listen);
            return ExitCode::FAILURE;
        }
    };
    let phone = Arc::new(Phone { store, auth: args.auth, legacy: args.legacy });
    println!("listening {}", listener.local_addr().map_or(args.listen.clone(), |a| a.to_string()));
    let _ = std::io::stdout().flush();
    for socket in listener.incoming().flatten() {
        let phone = Arc::clone(&phone);
        std::thread::spawn(move || {
            if let Err(e) = serve(socket, &phone) {
                eprintln!("adb-phone: connection: {e}");
            }
        });
    }
    ExitCode::SUCCESS
}

/// CNXN's banner: `device::` and the identifying properties (protocol.txt "CONNECT").
fn banner(phone: &Phone) -> std::io::Result<Vec<u8>> {
    let props = phone.store.update(|p| p.props.clone())?;
    let mut banner = String::from("device::");
    for key in ["ro.product.name", "ro.product.model", "ro.product.device"] {
        banner.push_str(&format!("{key}={};", props.get(key).map_or("", String::as_str)));
    }
    if !phone.legacy {
        banner.push_str(&format!("features={FEATURES}"));
    }
    Ok(banner.into_bytes())
}

fn serve(socket: TcpStream, phone: &Arc<Phone>) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
    let link = Arc::new(Link::new(socket.try_clone()?));
    let streams = Arc::new(Streams::default());
    let mut auth = Auth::new(phone.auth, phone.store.root());
    let mut reader = BufReader::new(socket);
    let mut online = false;
    let connect = |link: &Link| -> std::io::Result<()> {
        link.send(&Message::new(A_CNXN, A_VERSION, MAX_PAYLOAD, banner(phone)?))
    };
    let result = loop {
        let m = match Message::read_from(&mut reader) {
            Ok(Some(m)) => m,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        let sent = match m.command {
            A_CNXN => {
                *link.max_payload.lock().unwrap() = m.arg1.clamp(4096, MAX_PAYLOAD) as usize;
                online = auth.mode() == AuthMode::Off;
                if online { connect(&link) } else { link.send(&Message::new(A_AUTH, AUTH_TOKEN, 0, auth.new_token())) }
            }
            A_AUTH if !online => {
                let verdict = match m.arg0 {
                    AUTH_SIGNATURE => auth.signature(&m.data),
                    AUTH_RSAPUBLICKEY => auth.public_key(&m.data),
                    _ => Verdict::Wait,
                };
                // Said on stderr so a test can tell a known key from a newly allowed one.
                let how = if m.arg0 == AUTH_SIGNATURE { "a signature by a trusted key" } else { "a new public key" };
                match &verdict {
                    Verdict::Online => eprintln!("adb-phone: host allowed by {how}"),
                    Verdict::Wait => eprintln!("adb-phone: host not allowed ({how})"),
                    Verdict::Retry => {}
                }
                match verdict {
                    Verdict::Online => {
                        online = true;
                        connect(&link)
                    }
                    Verdict::Retry => link.send(&Message::new(A_AUTH, AUTH_TOKEN, 0, auth.new_token())),
                    Verdict::Wait => Ok(()),
                }
            }
            A_OPEN if online => open(phone, &link, &streams, m.arg0, &m.data),
            A_WRTE if online => {
                if streams.deliver(m.arg1, Event::Data(m.data)) {
                    Ok(())
                } else {
                    link.send(&Message::new(A_CLSE, 0, m.arg0, Vec::new()))
                }
            }
            A_OKAY if online => {
                streams.deliver(m.arg1, Event::Okay);
                Ok(())
            }
            A_CLSE if online => {
                streams.deliver(m.arg1, Event::Closed);
                Ok(())
            }
            _ => Ok(()), // before CNXN, or a command this protocol version does not have
        };
        if let Err(e) = sent {
            break Err(e);
        }
    };
    streams.close_all();
    result
}

enum Service {
    ShellV2(String),
    Raw(String),
    Sync,
}

fn service(name: &str, legacy: bool) -> Option<Service> {
    if let Some(cmd) = name.strip_prefix("exec:") {
        return Some(Service::Raw(cmd.to_string()));
    }
    if name == "sync:" {
        return Some(Service::Sync);
    }
    let (head, cmd) = name.split_once(':')?;
    let mut options = head.split(',');
    if options.next() != Some("shell") {
        return None;
    }
    let options: Vec<&str> = options.collect();
    match (options.is_empty(), options.contains(&"v2")) {
        (true, _) => Some(Service::Raw(cmd.to_string())),
        // An adbd without shell_v2 knows only `shell:`.
        (false, true) if !legacy => Some(Service::ShellV2(cmd.to_string())),
        (false, false) if !legacy => Some(Service::Raw(cmd.to_string())),
        _ => None,
    }
}

fn open(phone: &Arc<Phone>, link: &Arc<Link>, streams: &Arc<Streams>, remote: u32, data: &[u8]) -> std::io::Result<()> {
    let name = String::from_utf8_lossy(data).trim_end_matches('\0').to_string();
    let Some(service) = service(&name, phone.legacy) else {
        return link.send(&Message::new(A_CLSE, 0, remote, Vec::new()));
    };
    let stream = streams.open(Arc::clone(link), remote);
    stream.accept()?;
    let phone = Arc::clone(phone);
    std::thread::spawn(move || match service {
        Service::ShellV2(cmd) => shell::serve_v2(stream, &phone.store, &cmd),
        Service::Raw(cmd) => shell::serve_raw(stream, &phone.store, &cmd),
        Service::Sync => sync::serve(stream, &phone.store),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_are_told_apart_as_adbd_does() {
        assert!(matches!(service("shell,v2,raw:getprop", false), Some(Service::ShellV2(c)) if c == "getprop"));
        assert!(matches!(service("shell:ls -l", false), Some(Service::Raw(c)) if c == "ls -l"));
        assert!(matches!(service("exec:cmd package install -S 3", true), Some(Service::Raw(_))));
        assert!(service("shell,v2,raw:getprop", true).is_none());
        assert!(matches!(service("sync:", false), Some(Service::Sync)));
        assert!(service("reboot:", false).is_none());
    }
}
