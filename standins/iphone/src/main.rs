//! `iphone`: a stand-in for usbmuxd *and* the iPhones behind it, for tests that drive the
//! real `idevice` crate and libimobiledevice's tools with no phone and no USB. It speaks
//! usbmuxd's plist protocol on a Unix socket the test picks, and behind each Connect the
//! phone's side: lockdownd (with its TLS session), the diagnostics relay, the image
//! mounter, AFC, installation_proxy, Instruments' process control, device info, energy
//! gauge and sysmontap (DTX), and pcapd with the packets of launched apps' real HTTP
//! workloads; from iOS 17 the CoreDevice tunnel and, inside it, RSD, the app service and
//! the diagnostics service.
//!
//! ```text
//! iphone serve --socket PATH --root DIR
//! iphone pair --root DIR --udid UDID [--out FILE]
//! iphone ipa --bundle-id ID --version V --out FILE [--size BYTES] [--cpu-pct F] [--footprint-mb F] [--energy-cost F]
//! iphone sysdiagnose --root DIR --udid UDID --from UNIX_S --to UNIX_S [--charging-s N]
//! ```
//!
//! `serve` prints `listening PATH` once it accepts and serves until killed (one thread
//! per host connection). All state is in DIR: the phones attached are the files
//! `DIR/phones/<UDID>.toml`, read again on every request; `DIR/journal.jsonl` gets one
//! JSON line per request handled. `pair` makes the certificates, leaves the phone's half
//! in DIR and writes the host's pair record (usbmuxd's format) to DIR/pair/<UDID>.plist.
//! `ipa` writes a minimal app package for install tests. `sysdiagnose` leaves in the
//! phone's crash reports what the operator's button press would (a sysdiagnose archive
//! holding a powerlog of the window; for iOS 17+ staged for the diagnostics service's
//! capture instead) and prints its path. docs/platforms/ios-standin.md
//! says what is modelled, the phone file's keys and what each service answers.

mod afc;
mod archive;
mod coredevice;
mod diagnostics;
mod dtx;
mod duplex;
mod dvt;
mod energy;
mod http2;
mod ipa;
mod lockdown;
mod mux;
mod packets;
mod pair;
mod pcapd;
mod phone;
mod powerlog;
mod processes;
mod profile;
mod rsd;
mod services;
mod shim;
mod sysdiagnose;
mod sysmontap;
mod tcp;
mod tunnel;
mod wire;
mod workload;
mod xpc;

use std::collections::HashMap;
use std::io::{ErrorKind, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use phone::Store;

const USAGE: &str = "usage: iphone serve --socket PATH --root DIR\n       iphone pair --root DIR --udid UDID [--out FILE]\n       iphone ipa --bundle-id ID --version V --out FILE [--size BYTES] [--cpu-pct F] [--footprint-mb F] [--energy-cost F]\n       iphone sysdiagnose --root DIR --udid UDID --from UNIX_S --to UNIX_S [--charging-s N]";

/// What every host connection shares: the phones' DIR, the ports StartService opened and
/// the pcapd clients connected.
pub struct Server {
    pub store: Store,
    ports: Mutex<Ports>,
    pub taps: pcapd::Taps,
}

struct Ports {
    next: u16,
    open: HashMap<(String, u16), String>,
}

impl Server {
    /// A fresh port of this phone for `service` (lockdownd hands out ephemeral ports).
    pub fn open_port(&self, udid: &str, service: &str) -> u16 {
        let mut p = self.ports.lock().unwrap();
        p.next = if p.next >= 65000 { 49152 } else { p.next + 1 };
        let port = p.next;
        p.open.insert((udid.to_string(), port), service.to_string());
        port
    }

    /// The service behind a port; each port takes one connection, as lockdownd's do.
    pub fn service_at(&self, udid: &str, port: u16) -> Option<String> {
        self.ports.lock().unwrap().open.remove(&(udid.to_string(), port))
    }
}

fn options(args: &[String]) -> Result<HashMap<String, String>, String> {
    let mut out = HashMap::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let key = a.strip_prefix("--").ok_or_else(|| format!("unexpected argument `{a}`"))?;
        let value = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        out.insert(key.to_string(), value.clone());
    }
    Ok(out)
}

fn run(argv: &[String]) -> Result<(), String> {
    let (command, rest) = argv.split_first().ok_or("no command")?;
    let opts = options(rest)?;
    let need = |k: &str| opts.get(k).cloned().ok_or_else(|| format!("--{k} is required"));
    for k in opts.keys() {
        let known: &[&str] = match command.as_str() {
            "serve" => &["socket", "root"],
            "pair" => &["root", "udid", "out"],
            "ipa" => &["bundle-id", "version", "out", "size", "cpu-pct", "footprint-mb", "energy-cost"],
            "sysdiagnose" => &["root", "udid", "from", "to", "charging-s"],
            other => return Err(format!("unknown command `{other}`")),
        };
        if !known.contains(&k.as_str()) {
            return Err(format!("{command}: unknown option --{k}"));
        }
    }
    match command.as_str() {
        "pair" => {
            let root = PathBuf::from(need("root")?);
            std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
            let out = opts.get("out").map(PathBuf::from);
            let path = pair::pair(&Store::new(&root), &need("udid")?, out.as_deref()).map_err(|e| e.to_string())?;
            println!("{}", path.display());
            Ok(())
        }
        "ipa" => {
            let size =
                opts.get("size").map_or(Ok(4096), |s| s.parse().map_err(|_| format!("--size {s}: not a number")))?;
            let number = |k: &str, default: f64| {
                opts.get(k).map_or(Ok(default), |v| match v.parse::<f64>() {
                    Ok(n) if n.is_finite() && n >= 0.0 => Ok(n),
                    _ => Err(format!("--{k} {v}: not a number of 0 or more")),
                })
            };
            let d = profile::Profile::default();
            let behaviour = profile::Profile {
                cpu_pct: number("cpu-pct", d.cpu_pct)?,
                footprint_mb: number("footprint-mb", d.footprint_mb)?,
                energy_cost: number("energy-cost", d.energy_cost)?,
            };
            let bytes = ipa::make_ipa(&need("bundle-id")?, &need("version")?, size, behaviour);
            std::fs::write(need("out")?, bytes).map_err(|e| e.to_string())
        }
        "sysdiagnose" => {
            let seconds =
                |k: &str, v: &str| v.parse::<f64>().map_err(|_| format!("--{k} {v}: not a number of seconds"));
            let w = sysdiagnose::window(
                seconds("from", &need("from")?)?,
                seconds("to", &need("to")?)?,
                opts.get("charging-s").map_or(Ok(0.0), |v| seconds("charging-s", v))?,
            )?;
            let path = sysdiagnose::write(&Store::new(&PathBuf::from(need("root")?)), &need("udid")?, &w)
                .map_err(|e| e.to_string())?;
            println!("{}", path.display());
            Ok(())
        }
        _ => serve(PathBuf::from(need("socket")?), PathBuf::from(need("root")?)),
    }
}

fn serve(socket: PathBuf, root: PathBuf) -> Result<(), String> {
    std::fs::create_dir_all(root.join("phones")).map_err(|e| format!("{}: {e}", root.display()))?;
    let _ = std::fs::remove_file(&socket); // a socket left by an earlier run
    let listener = UnixListener::bind(&socket).map_err(|e| format!("listen on {}: {e}", socket.display()))?;
    let server = Arc::new(Server {
        store: Store::new(&root),
        ports: Mutex::new(Ports { next: 49152, open: HashMap::new() }),
        taps: pcapd::Taps::default(),
    });
    println!("listening {}", socket.display());
    let _ = std::io::stdout().flush();
    for conn in listener.incoming().flatten() {
        let server = Arc::clone(&server);
        std::thread::spawn(move || {
            match mux::serve(conn, &server) {
                // Hosts hang up without a Goodbye (libimobiledevice after StopSession) or
                // without TLS close_notify (the idevice crate drops its clients).
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::ConnectionReset | ErrorKind::BrokenPipe | ErrorKind::UnexpectedEof
                    ) => {}
                Err(e) => eprintln!("iphone: connection: {e}"),
                Ok(()) => {}
            }
        });
    }
    Ok(())
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match run(&argv) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iphone: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
