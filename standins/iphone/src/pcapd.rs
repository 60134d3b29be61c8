//! com.apple.pcapd, the phone's packet tap: a stream of frames (a 4-byte big-endian
//! length and a binary plist whose value is Data: pcapd's packet header and the packet,
//! see packets.rs) for as long as the host stays connected. Like a real tap it shows only
//! live traffic: each packet goes to the clients connected when it is sent, none is kept.
//! The traffic is what running apps' workloads send (workload.rs).

use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::Server;
use crate::duplex::Duplex;

pub const SERVICE: &str = "com.apple.pcapd";
/// Its journal lines' service.
pub const JOURNAL: &str = "pcapd";
/// A host that stops reading is dropped rather than stalling the app's workload.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

struct Client {
    id: u64,
    udid: String,
    stream: Box<dyn Write + Send>,
    packets: u64,
}

/// The pcapd clients connected now, across the phones.
#[derive(Default)]
pub struct Taps {
    next: Mutex<u64>,
    clients: Mutex<Vec<Client>>,
}

/// One packet as the service frames it.
fn frame(record: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    plist::to_writer_binary(&mut body, &plist::Value::Data(record.to_vec())).expect("Data serializes");
    crate::wire::plist_frame(&body)
}

impl Taps {
    fn add(&self, udid: &str, stream: Box<dyn Write + Send>) -> u64 {
        let id = {
            let mut n = self.next.lock().unwrap();
            *n += 1;
            *n
        };
        self.clients.lock().unwrap().push(Client { id, udid: udid.to_string(), stream, packets: 0 });
        id
    }

    /// Forgets a client; the packets it was sent.
    fn remove(&self, id: u64) -> u64 {
        let mut clients = self.clients.lock().unwrap();
        let packets = clients.iter().find(|c| c.id == id).map_or(0, |c| c.packets);
        clients.retain(|c| c.id != id);
        packets
    }

    /// Sends these packet records to every client of the phone connected now; how many
    /// clients got them.
    pub fn deliver(&self, udid: &str, records: &[Vec<u8>]) -> usize {
        let bytes: Vec<u8> = records.iter().flat_map(|r| frame(r)).collect();
        let mut clients = self.clients.lock().unwrap();
        // A client that hung up is dropped here (its serve thread removes it too).
        clients.retain_mut(|c| {
            if c.udid != udid {
                return true;
            }
            let sent = c.stream.write_all(&bytes).is_ok();
            if sent {
                c.packets += records.len() as u64;
            }
            sent
        });
        clients.iter().filter(|c| c.udid == udid).count()
    }
}

/// One host's tap: the lockdown service's (a usbmuxd stream) or, after its RSDCheckin,
/// pcapd.shim.remote's (TCP in the tunnel); the packets are the same.
pub fn serve(s: impl Duplex, server: &Arc<Server>, udid: &str) -> io::Result<()> {
    let writer = s.try_clone()?;
    writer.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let id = server.taps.add(udid, Box::new(writer));
    server.store.journal(udid, JOURNAL, "connect", serde_json::json!({"client": id}));
    // The host sends nothing; its hang-up ends the tap.
    let mut s = s;
    let mut sink = [0u8; 256];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    let packets = server.taps.remove(id);
    server.store.journal(udid, JOURNAL, "disconnect", serde_json::json!({"client": id, "packets": packets}));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    #[test]
    fn packets_go_to_the_phones_connected_clients_as_binary_plist_data() {
        let taps = Taps::default();
        let (a_host, a_phone) = UnixStream::pair().unwrap();
        let (b_host, b_phone) = UnixStream::pair().unwrap();
        let a = taps.add("U", Box::new(a_phone));
        taps.add("OTHER", Box::new(b_phone));
        assert_eq!(taps.deliver("U", &[b"one".to_vec(), b"two".to_vec()]), 1);
        assert_eq!(taps.remove(a), 2);
        assert_eq!(taps.deliver("U", &[b"late".to_vec()]), 0, "no client: the packet is gone");
        drop(taps);
        let mut a_host = a_host;
        let mut got = Vec::new();
        a_host.read_to_end(&mut got).unwrap();
        let mut r = got.as_slice();
        for want in [&b"one"[..], b"two"] {
            let mut len = [0u8; 4];
            r.read_exact(&mut len).unwrap();
            let mut body = vec![0; u32::from_be_bytes(len) as usize];
            r.read_exact(&mut body).unwrap();
            assert!(body.starts_with(b"bplist00"));
            assert_eq!(plist::from_bytes::<plist::Value>(&body).unwrap(), plist::Value::Data(want.to_vec()));
        }
        assert!(r.is_empty());
        drop(b_host);
    }
}
