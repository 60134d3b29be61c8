//! iOS 17+: a service over RSD inside the CoreDevice tunnel that lockdown's proxy opens
//! over USB (the crate's userspace TCP stack: no TUN device, no root).

use idevice::tcp::handle::AdapterHandle;
use idevice::{IdeviceError, IdeviceService, ReadWrite};

use super::mux::Provider;

/// What failed, for the message, and the crate's error.
pub type TunnelError = (&'static str, IdeviceError);

pub const OPENING_TUNNEL: &str = "opening the CoreDevice tunnel";

/// A stream to RSD service `service`; the handle keeps the tunnel up while it is used.
/// `finding` and `connecting` name the two steps after the handshake in errors.
pub async fn rsd_service(
    p: &Provider,
    service: &str,
    finding: &'static str,
    connecting: &'static str,
) -> Result<(AdapterHandle, Box<dyn ReadWrite>), TunnelError> {
    let proxy = idevice::core_device_proxy::CoreDeviceProxy::connect(p).await.map_err(|e| (OPENING_TUNNEL, e))?;
    let rsd_port = proxy.tunnel_info().server_rsd_port;
    let mut tunnel = proxy.create_software_tunnel().map_err(|e| (OPENING_TUNNEL, e))?.to_async_handle();
    let rsd = tunnel.connect(rsd_port).await.map_err(|e| (OPENING_TUNNEL, e.into()))?;
    let hs = idevice::rsd::RsdHandshake::new(rsd).await.map_err(|e| ("the RSD handshake", e))?;
    let port = hs.services.get(service).ok_or((finding, IdeviceError::ServiceNotFound))?.port;
    let stream: Box<dyn ReadWrite> = Box::new(tunnel.connect(port).await.map_err(|e| (connecting, e.into()))?);
    Ok((tunnel, stream))
}
