//! Is a power monitor there? For `lab discover`: an Otii server is greeted and asked for
//! its devices (`otii_get_devices` only: no licence is reserved, no supply switched on);
//! Monsoons are listed by their USB ids without being opened.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::ProbeError;
use super::monsoon::protocol::{PRODUCT_ID, VENDOR_ID};
use super::otii::{Connection, OtiiError};
use crate::transport::{ForwardTarget, Transport};

/// The Otii 3 server's default address on a monitor's host.
pub const OTII_DEFAULT: &str = "127.0.0.1:1905";

/// The Otii server at `address` on the host behind `transport`: `Ok(None)` when nothing
/// listens there, else the instruments it has (`Arc 5A1B (Arc)`). A server that answers
/// but not as Otii 3 does is an error.
pub async fn probe_otii(
    transport: &Arc<dyn Transport>,
    remote: bool,
    address: &str,
    limit: Duration,
) -> Result<Option<Vec<String>>, ProbeError> {
    let forward = if remote {
        let target: ForwardTarget = format!("tcp:{address}")
            .parse()
            .map_err(|source| ProbeError::Address { address: address.into(), source })?;
        Some(transport.forward(0, &target).await?)
    } else {
        None
    };
    let here = forward.as_ref().map_or_else(|| address.to_string(), |f| f.local_addr().to_string());
    let mut conn = match Connection::connect(&here, limit).await {
        Ok(c) => c,
        // Nothing listening (through a forward: the far end refused, so the greeting never came).
        Err(OtiiError::Unreachable { .. } | OtiiError::Closed { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let devices = conn.request("otii_get_devices", json!({"timeout": 3})).await?;
    let list = devices["devices"].as_array().cloned().unwrap_or_default();
    Ok(Some(
        list.iter()
            .map(|d| {
                let s = |k: &str| d[k].as_str().unwrap_or("?").to_string();
                format!("{} {} ({})", s("type"), s("device_id"), s("name"))
            })
            .collect(),
    ))
}

/// The Monsoons on this machine's USB: (serial, product), none opened. A machine with no
/// USB bus at all (a container without /sys/bus/usb) has none.
pub async fn list_monsoons() -> Result<Vec<(String, String)>, ProbeError> {
    if cfg!(target_os = "linux") && !std::path::Path::new("/sys/bus/usb/devices").exists() {
        return Ok(Vec::new());
    }
    tokio::task::spawn_blocking(|| {
        use nusb::MaybeFuture;
        let devices = nusb::list_devices().wait().map_err(ProbeError::Usb)?;
        Ok(devices
            .filter(|d| d.vendor_id() == VENDOR_ID && d.product_id() == PRODUCT_ID)
            .map(|d| {
                (d.serial_number().unwrap_or("(no serial)").to_string(), d.product_string().unwrap_or("").to_string())
            })
            .collect())
    })
    .await?
}
