//! This machine's address on the lab's network, for the traffic endpoint phones reach.

use std::net::{IpAddr, UdpSocket};

/// The source address the kernel would use towards another network: connecting a UDP
/// socket picks the route and sends nothing. `None` without a route, or when only
/// loopback would be used.
pub fn lan_address() -> Option<IpAddr> {
    let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
    // TEST-NET-1 (RFC 5737): routed like any outside address, never answered.
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}
