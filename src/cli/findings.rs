//! What `lab discover` and `lab init` share: where each host's tools are asked
//! (`ReachArgs`), and the findings as the table and notes people read.

use std::fmt::Write as _;
use std::time::Duration;

use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::exit::CliError;
use crate::config::{AdbServer, UsbmuxdAddress, parse_duration};
use crate::discover::{DiscoverOptions, HostFindings, HubPlace, Reached};

/// Where to look besides each tool's default (the same on every host).
#[derive(Debug, clap::Args)]
pub struct ReachArgs {
    /// The adb server to ask, as each host reaches it. Default: adb's own (127.0.0.1:5037).
    #[arg(long, value_name = "HOST:PORT")]
    pub adb_server: Option<String>,
    /// usbmuxd: a socket path or a TCP address. Default: /var/run/usbmuxd.
    #[arg(long, value_name = "PATH|HOST:PORT")]
    pub usbmuxd: Option<String>,
    /// The Otii 3 server to ask. Default: 127.0.0.1:1905.
    #[arg(long, value_name = "HOST:PORT")]
    pub otii: Option<String>,
    /// Each call's time limit: a tool that does not answer within it is reported.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub timeout: String,
}

impl ReachArgs {
    pub fn options(&self) -> Result<DiscoverOptions, CliError> {
        let host_port = |flag: &str, text: &str, example: &str| {
            crate::config::parse_host_port(text, None).map_err(|why| {
                CliError::bad_input(format!(
                    "{flag} {text}: not a host and port ({why}); fix: write e.g. {flag} {example}"
                ))
            })
        };
        let adb_server = match &self.adb_server {
            Some(t) => {
                let (host, port) = host_port("--adb-server", t, "127.0.0.1:5037")?;
                Some(AdbServer { host, port })
            }
            None => None,
        };
        let usbmuxd = match &self.usbmuxd {
            Some(t) if t.starts_with('/') => Some(UsbmuxdAddress::Socket(t.into())),
            Some(t) => {
                let (host, port) = host_port("--usbmuxd", t, "/var/run/usbmuxd or --usbmuxd 127.0.0.1:27015")?;
                Some(UsbmuxdAddress::Tcp { host, port })
            }
            None => None,
        };
        let otii = match &self.otii {
            Some(t) => Some(host_port("--otii", t, "127.0.0.1:1905")?),
            None => None,
        };
        let limit = parse_duration(&self.timeout).ok().filter(|d| *d > Duration::ZERO).ok_or_else(|| {
            CliError::bad_input(format!("--timeout {}: not a duration; fix: write e.g. --timeout 10s", self.timeout))
        })?;
        Ok(DiscoverOptions { adb_server, usbmuxd, otii, limit })
    }

    pub fn reached(opts: &DiscoverOptions) -> Reached {
        Reached { adb_server: opts.adb_server.clone(), usbmuxd: opts.usbmuxd.clone() }
    }
}

#[derive(Tabled)]
struct Row {
    host: String,
    kind: String,
    id: String,
    model: String,
    os: String,
    state: String,
    #[tabled(rename = "hub port")]
    hub: String,
    #[tabled(rename = "in lab")]
    in_lab: String,
}

pub fn render(found: &[HostFindings]) -> String {
    let mut rows = Vec::new();
    let mut notes = String::new();
    let (mut new, mut blocked) = (0, 0);
    for h in found {
        if let Some(e) = &h.unreachable {
            let _ = writeln!(notes, "{}: not looked at: {e}", h.host);
            continue;
        }
        for p in &h.phones {
            rows.push(Row {
                host: h.host.clone(),
                kind: match p.platform {
                    crate::config::Platform::Ios => "iPhone".into(),
                    _ => "Android".into(),
                },
                id: p.id.clone(),
                model: p.model.clone().unwrap_or_default(),
                os: p.os.clone().unwrap_or_default(),
                state: p.state.word().into(),
                hub: match &p.hub {
                    HubPlace::Switching { location, port, .. } => format!("{location} port {port}"),
                    HubPlace::NotSwitching { location, port, .. } => format!("{location} port {port} (no switching)"),
                    HubPlace::Unknown { .. } => "-".into(),
                },
                in_lab: p.in_lab.clone().unwrap_or_else(|| "no".into()),
            });
            if p.in_lab.is_none() {
                new += 1;
            }
            if !p.problems.is_empty() {
                blocked += 1;
            }
            for problem in &p.problems {
                let _ = writeln!(notes, "{} ({}): {problem}", p.id, h.host);
            }
        }
        for m in &h.monitors {
            rows.push(Row {
                host: h.host.clone(),
                kind: format!("{} monitor", m.kind),
                id: m.address.clone(),
                model: m.detail.clone(),
                os: String::new(),
                state: if m.problems.is_empty() { "ready".into() } else { "not ready".into() },
                hub: "-".into(),
                in_lab: m.in_lab.clone().unwrap_or_else(|| "no".into()),
            });
            for problem in &m.problems {
                let _ = writeln!(notes, "{} ({}): {problem}", m.address, h.host);
            }
        }
        for n in &h.notes {
            let _ = writeln!(notes, "{}: {n}", h.host);
        }
    }
    let mut out = if rows.is_empty() {
        "No phone or power monitor found (plugging one in: docs/first-phone.md).\n".to_string()
    } else {
        Table::new(&rows).with(Style::rounded()).to_string() + "\n"
    };
    out.push_str(&notes);
    let phones = found.iter().map(|h| h.phones.len()).sum::<usize>();
    if phones > 0 {
        let _ = writeln!(
            out,
            "{phones} phone(s): {new} not in the lab file, {blocked} not usable yet (fixes above). \
             `lab discover --toml` prints their [[device]] blocks."
        );
    }
    out
}
