//! Why a host's hubs could not be read (`HubsError`), why a phone cannot be switched where
//! it is (`PlaceError`), and why a `{ uhubctl = "auto" }` tether found no port
//! (`AutoPortError`). `lab hubs --json` prints each as its message.

use crate::collect::ParseError;
use crate::collect::hubs::uhubctl::Switching;
use crate::transport::TransportError;

#[derive(Debug, thiserror::Error)]
pub enum HubsError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// uhubctl failed for another reason than finding no hub; `said` is its first line on stderr.
    #[error("`uhubctl -f` exited {status:?}: {said}")]
    Exited { status: Option<i32>, said: String },
    #[error("`uhubctl -f` printed what does not read as uhubctl 2.x: {0}")]
    Unreadable(ParseError),
}

impl HubsError {
    /// uhubctl is not there to run.
    pub fn not_installed(&self) -> bool {
        matches!(self, HubsError::Transport(TransportError::Spawn { .. }))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceError {
    #[error(
        "USB serial {} is on no port of the {hubs} hub(s) uhubctl lists; fix: plug the phone into a hub with per-port power switching (`lab hubs` lists them), or give the port: {{ uhubctl = {{ location = \"…\", port = N }} }}",
        serial.as_deref().unwrap_or("(none: the device has no USB serial)")
    )]
    OnNoPort { serial: Option<String>, hubs: usize },
    /// `at`: each place as `LOCATION port N`.
    #[error("USB serial found on several ports ({}); fix: give the port explicitly", at.join(", "))]
    SeveralPorts { at: Vec<String> },
    #[error(
        "it is on hub {location} port {port}, whose hub switches {}; fix: move it to a hub with per-port power switching (`ppps` in `lab hubs`)",
        if *switching == Switching::Ganged { "all its ports together (ganged)" } else { "no power at all (nops)" }
    )]
    NotPerPort { location: String, port: u32, switching: Switching },
}

#[derive(Debug, thiserror::Error)]
#[error("{device}: tether = {{ uhubctl = \"auto\" }}: {why}")]
pub struct AutoPortError {
    pub device: String,
    pub why: AutoPortWhy,
}

#[derive(Debug, thiserror::Error)]
pub enum AutoPortWhy {
    #[error("host {0} is not in the lab")]
    UnknownHost(String),
    #[error("on host {host}: {source}")]
    Hubs { host: String, source: HubsError },
    #[error(
        "the device has no USB serial to look for (an Android serial, an iPhone UDID, `[device.sim] usb_serial`; a Wi-Fi adb `IP:PORT` is not one); fix: give the port: {{ uhubctl = {{ location = \"…\", port = N }} }}"
    )]
    NoSerial,
    #[error(transparent)]
    Place(PlaceError),
}
