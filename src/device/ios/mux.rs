//! Reaching usbmuxd on a phone's host: its socket directly when the host is this machine,
//! otherwise one forward per host and socket (`Transport::forward`), shared by every
//! iPhone on that host — the way the Android backend shares a host's adb server.
//!
//! usbmuxd turns each socket into one tunnel once it is told to `Connect`, so every
//! service call opens a fresh socket to the same address; the shared part is the address
//! (and over SSH the forward behind it), not one socket.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use idevice::pairing_file::PairingFile;
use idevice::provider::{IdeviceProvider, UsbmuxdProvider};
use idevice::usbmuxd::{UsbmuxdAddr, UsbmuxdConnection, UsbmuxdDevice};
use idevice::{Idevice, IdeviceError};

use super::mux_error::MuxError;
use crate::config::UsbmuxdAddress;
use crate::transport::{Forward, ForwardTarget, Transport};

/// The system's usbmuxd socket (Linux and macOS).
pub const SYSTEM_SOCKET: &str = "/var/run/usbmuxd";

/// usbmuxd as this process reaches it.
#[derive(Debug)]
pub struct Mux {
    pub addr: UsbmuxdAddr,
    /// How the phone's host names it (`/var/run/usbmuxd`, `127.0.0.1:27015`): for messages.
    pub shown: String,
    /// Keeps an SSH host's forward open while a device uses it.
    _forward: Option<Forward>,
}

type Shared = tokio::sync::Mutex<HashMap<(String, String), Weak<Mux>>>;

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(Default::default)
}

impl Mux {
    /// usbmuxd at `configured` (default: the system socket) on `host`, reached through
    /// `transport` when the host is not this machine. Devices of one host share the result.
    pub async fn open(
        host: &str,
        remote: bool,
        transport: &Arc<dyn Transport>,
        configured: Option<&UsbmuxdAddress>,
    ) -> Result<Arc<Mux>, MuxError> {
        let target = match configured {
            None => ForwardTarget::Unix(SYSTEM_SOCKET.into()),
            Some(UsbmuxdAddress::Socket(p)) => ForwardTarget::Unix(p.clone()),
            Some(UsbmuxdAddress::Tcp { host, port }) => ForwardTarget::Tcp { host: host.clone(), port: *port },
        };
        let shown = match &target {
            ForwardTarget::Unix(p) => p.display().to_string(),
            ForwardTarget::Tcp { .. } => configured.map(ToString::to_string).unwrap_or_default(),
        };
        let mut map = shared().lock().await;
        let key = (host.to_string(), target.to_string());
        if let Some(m) = map.get(&key).and_then(Weak::upgrade) {
            return Ok(m);
        }
        let (addr, forward) = match (&target, remote) {
            (ForwardTarget::Unix(p), false) => (UsbmuxdAddr::UnixSocket(p.display().to_string()), None),
            (ForwardTarget::Tcp { host, port }, false) => (UsbmuxdAddr::TcpSocket(resolve(host, *port).await?), None),
            (target, true) => {
                let fwd = transport.forward(0, target).await?;
                (UsbmuxdAddr::TcpSocket(fwd.local_addr()), Some(fwd))
            }
        };
        let mux = Arc::new(Mux { addr, shown, _forward: forward });
        map.insert(key, Arc::downgrade(&mux));
        Ok(mux)
    }

    /// A new conversation with usbmuxd.
    pub async fn connect(&self) -> Result<UsbmuxdConnection, IdeviceError> {
        self.addr.connect(0).await
    }

    /// What usbmuxd lists.
    pub async fn devices(&self) -> Result<Vec<UsbmuxdDevice>, IdeviceError> {
        self.connect().await?.get_devices().await
    }
}

async fn resolve(host: &str, port: u16) -> Result<SocketAddr, MuxError> {
    let found = tokio::time::timeout(Duration::from_secs(10), tokio::net::lookup_host((host, port)))
        .await
        .map_err(|_| MuxError::ResolveSlow { host: host.into() })?
        .map_err(|source| MuxError::Resolve { host: host.into(), source })?;
    found.into_iter().next().ok_or_else(|| MuxError::NoAddress { host: host.into() })
}

/// usbmuxd's provider, with the pair record given in the lab file when there is one.
#[derive(Debug)]
pub struct Provider {
    pub usb: UsbmuxdProvider,
    pub pairing: Option<PairingFile>,
}

impl IdeviceProvider for Provider {
    fn connect(&self, port: u16) -> Pin<Box<dyn Future<Output = Result<Idevice, IdeviceError>> + Send>> {
        self.usb.connect(port)
    }

    fn label(&self) -> &str {
        self.usb.label()
    }

    fn get_pairing_file(&self) -> Pin<Box<dyn Future<Output = Result<PairingFile, IdeviceError>> + Send>> {
        match &self.pairing {
            Some(p) => {
                let p = p.clone();
                Box::pin(async move { Ok(p) })
            }
            None => self.usb.get_pairing_file(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::LocalTransport;

    #[tokio::test]
    async fn the_iphones_of_one_host_share_its_usbmuxd_and_other_hosts_do_not() {
        let t: Arc<dyn Transport> = Arc::new(LocalTransport::new("local"));
        let at = UsbmuxdAddress::Socket("/tmp/lab-test-usbmuxd".into());
        let a = Mux::open("local", false, &t, Some(&at)).await.unwrap();
        let b = Mux::open("local", false, &t, Some(&at)).await.unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let other = Mux::open("shelf-2", false, &t, Some(&at)).await.unwrap();
        assert!(!Arc::ptr_eq(&a, &other));
        let system = Mux::open("local", false, &t, None).await.unwrap();
        assert_eq!(system.shown, SYSTEM_SOCKET);
        // Once no device holds it, the next open makes a new one (an SSH forward is closed).
        let weak = Arc::downgrade(&other);
        drop(other);
        assert!(weak.upgrade().is_none());
    }
}
