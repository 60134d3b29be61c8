//! Samples taken over USB while a tethered trial runs (`[device.ios] samples`): Xcode's
//! energy gauge and sysmontap over DVT, the app's packets through pcapd. Each runs as its
//! own task on its own connection from launch until collect, and hands back what it
//! gathered when told to stop; a phone that drops off ends the task with what it had and
//! a note of why. None of this runs during an untethered soak: the phone is off USB then,
//! and the sampler is dropped at the unplug.
//!
//! Before iOS 17 the services are lockdown's (`com.apple.instruments.remoteserver`,
//! `com.apple.pcapd`); from 17 the same ones are reached over RSD inside the CoreDevice
//! tunnel (`com.apple.instruments.dtservicehub`, `com.apple.pcapd.shim.remote`), each task
//! holding its own tunnel.

use std::time::Duration;

use idevice::dvt::energy_monitor::{EnergyMonitorClient, EnergySample};
use idevice::dvt::remote_server::RemoteServerClient;
use idevice::dvt::sysmontap::{SysmontapClient, SysmontapConfig};
use idevice::pcapd::{DevicePacket, PcapdClient};
use idevice::tcp::handle::AdapterHandle;
use idevice::{IdeviceService, ReadWrite, RsdService};
use plist::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::mux::Provider;
use super::phone::CALL;
use super::sample_error::SampleError;
use super::tunnel::rsd_service;
use crate::config::IosSample;
use crate::measure::Measurement;

pub const SRC_ENERGY: &str = "DVT energy gauge (Xcode's unitless cost, not joules)";
pub const SRC_CPU: &str = "DVT sysmontap cpuUsage (% of one core)";
pub const SRC_MEMORY: &str = "DVT sysmontap physFootprint";
pub const SRC_PACKETS: &str = "pcapd (the app's packets, both directions)";
pub const SRC_REQUESTS: &str = "pcapd (HTTP requests to the lab's endpoint)";

/// How often the energy gauge is asked and sysmontap reports (Xcode's own gauges: 1 s).
pub const EVERY: Duration = Duration::from_secs(1);

/// What one sample task gathered.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Gathered {
    /// `energy.cost` of each gauge reading of the app's pid.
    pub energy: Vec<f64>,
    /// (cpuUsage %, physFootprint bytes) of each sysmontap row of the app's pid, the first
    /// row left out (its CPU figure covers the time before sampling began).
    pub cpu: Vec<(f64, f64)>,
    pub packets: Option<Packets>,
    /// Why a task ended early or never started, for the attempt's notes.
    pub problems: Vec<String>,
}

/// The app's packets as pcapd showed them.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Packets {
    pub packets: u64,
    /// IP bytes (the packet lengths pcapd reports, without its own header).
    pub bytes: u64,
    /// TCP segments to `endpoint_port` that start an HTTP request.
    pub requests: u64,
}

/// How the phone's services are reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Lockdown's services (iOS ≤ 16).
    Lockdown,
    /// RSD inside the CoreDevice tunnel (iOS 17+).
    Tunnel,
}

/// A stream to RSD service `service` inside a tunnel of its own, within a call's bound.
async fn over_tunnel(
    p: &Provider,
    service: &str,
    finding: &'static str,
    connecting: &'static str,
    what: &str,
) -> Result<(AdapterHandle, Box<dyn ReadWrite>), SampleError> {
    tokio::time::timeout(CALL, rsd_service(p, service, finding, connecting))
        .await
        .map_err(|_| SampleError::NoTunnel { what: what.into() })?
        .map_err(|(step, source)| SampleError::Tunnel { what: what.into(), step, source })
}

/// A DVT connection; on iOS 17+ with the tunnel it runs in, kept up while it is used.
async fn dvt(p: &Provider, via: Via, what: &'static str) -> Result<(Option<AdapterHandle>, Dvt), SampleError> {
    match via {
        Via::Lockdown => Ok((None, bounded(what, RemoteServerClient::connect(p)).await?)),
        Via::Tunnel => {
            let service = "com.apple.instruments.dtservicehub";
            let (tunnel, stream) = over_tunnel(p, service, "finding DVT over RSD", "connecting to DVT", what).await?;
            Ok((Some(tunnel), RemoteServerClient::new(stream)))
        }
    }
}

type Dvt = RemoteServerClient<Box<dyn ReadWrite>>;

/// The packet tap; on iOS 17+ with its tunnel.
async fn tap(p: &Provider, via: Via) -> Result<(Option<AdapterHandle>, PcapdClient), SampleError> {
    let what = "pcapd";
    match via {
        Via::Lockdown => Ok((None, bounded(what, PcapdClient::connect(p)).await?)),
        Via::Tunnel => {
            let service = "com.apple.pcapd.shim.remote";
            let (tunnel, stream) =
                over_tunnel(p, service, "finding pcapd over RSD", "connecting to pcapd", what).await?;
            let client = bounded(what, <PcapdClient as RsdService>::from_stream(stream)).await?;
            Ok((Some(tunnel), client))
        }
    }
}

/// The running sample tasks of one launched app.
pub struct Sampler {
    stop: watch::Sender<bool>,
    tasks: Vec<(IosSample, JoinHandle<Gathered>)>,
}

impl Sampler {
    /// Starts one task per kind in `kinds`, each on the connection `providers` gives it.
    /// `endpoint_port`: the lab's endpoint as the app reaches it, when the workload talks to it.
    ///
    /// Each runs on a blocking thread of its own, driven by this runtime's handle: the
    /// crate's RSD futures are not `Send`. A dropped sampler's tasks end at their next
    /// step, when they see the stop channel closed.
    pub fn start(kinds: Vec<(IosSample, Provider)>, via: Via, pid: u32, endpoint_port: Option<u16>) -> Sampler {
        let (stop, rx) = watch::channel(false);
        let handle = tokio::runtime::Handle::current();
        let tasks = kinds
            .into_iter()
            .map(|(kind, p)| {
                let (rx, handle) = (rx.clone(), handle.clone());
                let task = tokio::task::spawn_blocking(move || {
                    handle.block_on(async move {
                        match kind {
                            IosSample::Energy => energy(p, via, pid, rx).await,
                            IosSample::Cpu => cpu(p, via, pid, rx).await,
                            IosSample::Packets => packets(p, via, pid, endpoint_port, rx).await,
                        }
                    })
                });
                (kind, task)
            })
            .collect();
        Sampler { stop, tasks }
    }

    /// Stops every task and merges what they gathered; a task that does not stop within
    /// a call's bound is abandoned with a note.
    pub async fn finish(mut self) -> Gathered {
        let _ = self.stop.send(true);
        let mut all = Gathered::default();
        for (kind, task) in std::mem::take(&mut self.tasks) {
            match tokio::time::timeout(CALL, task).await {
                Ok(Ok(g)) => {
                    all.energy.extend(g.energy);
                    all.cpu.extend(g.cpu);
                    all.packets = all.packets.or(g.packets);
                    all.problems.extend(g.problems);
                }
                Ok(Err(e)) => all.problems.push(format!("{kind:?} sampling: {e}")),
                Err(_) => {
                    // Left to end at its next step, once it sees the stop (a blocking task cannot be aborted).
                    all.problems.push(format!("{kind:?} sampling did not stop within {} s", CALL.as_secs()));
                }
            }
        }
        all
    }
}

/// Waits one interval; `false` once stop was asked (or the sampler is gone).
async fn tick(stop: &mut watch::Receiver<bool>) -> bool {
    if *stop.borrow() {
        return false;
    }
    tokio::select! {
        _ = stop.changed() => false,
        _ = tokio::time::sleep(EVERY) => true,
    }
}

async fn bounded<T>(what: &str, fut: impl Future<Output = Result<T, idevice::IdeviceError>>) -> Result<T, SampleError> {
    match tokio::time::timeout(CALL, fut).await {
        Ok(r) => r.map_err(|source| SampleError::Call { what: what.into(), source }),
        Err(_) => Err(SampleError::NoAnswer { what: what.into() }),
    }
}

/// Asks Xcode's energy gauge for the app's pid once per interval.
async fn energy(p: Provider, via: Via, pid: u32, mut stop: watch::Receiver<bool>) -> Gathered {
    let mut g = Gathered::default();
    let run = async {
        let what = "energy gauge";
        let (_tunnel, mut rs) = dvt(&p, via, what).await?;
        let mut gauge = bounded(what, EnergyMonitorClient::new(&mut rs)).await?;
        bounded(what, gauge.start_sampling(&[pid])).await?;
        while tick(&mut stop).await {
            let bytes = bounded(what, gauge.sample_attributes(&[pid])).await?;
            let samples =
                EnergySample::from_bytes(&bytes).map_err(|source| SampleError::Call { what: what.into(), source })?;
            g.energy.extend(samples.iter().filter(|s| s.pid == pid).map(|s| s.total_energy));
        }
        let _ = bounded(what, gauge.stop_sampling(&[pid])).await;
        Ok::<(), SampleError>(())
    };
    if let Err(e) = run.await {
        g.problems.push(e.to_string());
    }
    g
}

const PROC_ATTRS: [&str; 3] = ["pid", "cpuUsage", "physFootprint"];

/// The app's (cpuUsage, physFootprint) in a sysmontap `Processes` table, whose rows list
/// the values of `PROC_ATTRS` in order, keyed by pid.
pub fn process_row(processes: &plist::Dictionary, pid: u32) -> Option<(f64, f64)> {
    let row = processes.get(&pid.to_string())?.as_array()?;
    let num = |v: &Value| v.as_real().or_else(|| v.as_signed_integer().map(|i| i as f64));
    let at = |name: &str| PROC_ATTRS.iter().position(|a| *a == name).and_then(|i| row.get(i)).and_then(num);
    Some((at("cpuUsage")?, at("physFootprint")?))
}

/// sysmontap's rows for the app's pid, as the phone pushes them.
async fn cpu(p: Provider, via: Via, pid: u32, mut stop: watch::Receiver<bool>) -> Gathered {
    let mut g = Gathered::default();
    let run = async {
        let what = "sysmontap";
        let (_tunnel, mut rs) = dvt(&p, via, what).await?;
        let mut tap = bounded(what, SysmontapClient::new(&mut rs)).await?;
        let config = SysmontapConfig {
            interval_ms: EVERY.as_millis() as u32,
            process_attributes: PROC_ATTRS.iter().map(|a| a.to_string()).collect(),
            system_attributes: Vec::new(),
        };
        bounded(what, tap.set_config(&config)).await?;
        bounded(what, tap.start()).await?;
        let mut first = true;
        loop {
            let sample = tokio::select! {
                _ = stop.changed() => break,
                s = tap.next_sample() => s.map_err(|source| SampleError::Call { what: what.into(), source })?,
            };
            let Some(row) = sample.processes.as_ref().and_then(|ps| process_row(ps, pid)) else { continue };
            if std::mem::take(&mut first) {
                continue;
            }
            g.cpu.push(row);
        }
        let _ = bounded(what, tap.stop()).await;
        Ok::<(), SampleError>(())
    };
    if let Err(e) = run.await {
        g.problems.push(e.to_string());
    }
    g
}

/// HTTP methods a request line starts with.
const METHODS: [&[u8]; 7] = [b"GET ", b"POST ", b"PUT ", b"HEAD ", b"DELETE ", b"PATCH ", b"OPTIONS "];

/// Whether `p` (as the crate hands it over: a 14-byte Ethernet header, real or made up,
/// then IPv4 or IPv6) is a TCP segment to `port` whose payload starts an HTTP request.
pub fn is_http_request(p: &DevicePacket, port: u16) -> bool {
    let Some(ip) = p.data.get(14..) else { return false };
    let (proto, tcp) = match ip.first().map(|b| b >> 4) {
        Some(4) => {
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            (ip.get(9).copied(), ip.get(ihl..))
        }
        // Extension headers are not followed: a plain HTTP request has none.
        Some(6) => (ip.get(6).copied(), ip.get(40..)),
        _ => return false,
    };
    let (Some(6), Some(tcp)) = (proto, tcp) else { return false };
    if tcp.len() < 20 || u16::from_be_bytes([tcp[2], tcp[3]]) != port {
        return false;
    }
    let payload = tcp.get(usize::from(tcp[12] >> 4) * 4..).unwrap_or_default();
    METHODS.iter().any(|m| payload.starts_with(m))
}

/// The app's packets (pcapd tags every packet with the pid that sent or received it).
async fn packets(p: Provider, via: Via, pid: u32, port: Option<u16>, mut stop: watch::Receiver<bool>) -> Gathered {
    let mut g = Gathered::default();
    let mut count = Packets::default();
    let run = async {
        let what = "pcapd";
        let (_tunnel, mut tap) = tap(&p, via).await?;
        loop {
            let packet = tokio::select! {
                _ = stop.changed() => break,
                pk = tap.next_packet() => pk.map_err(|source| SampleError::Call { what: what.into(), source })?,
            };
            if packet.pid != pid && packet.epid != pid {
                continue;
            }
            count.packets += 1;
            count.bytes += u64::from(packet.packet_length);
            if port.is_some_and(|port| is_http_request(&packet, port)) {
                count.requests += 1;
            }
        }
        Ok::<(), SampleError>(())
    };
    if let Err(e) = run.await {
        g.problems.push(e.to_string());
    }
    g.packets = Some(count);
    g
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = xs.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| sum / n as f64)
}

impl Gathered {
    /// The trial's figures: means over the samples; `requests` only when the workload
    /// talked to the lab's endpoint (`with_requests`).
    pub fn measurements(&self, with_requests: bool) -> Vec<Measurement> {
        let mut out = Vec::new();
        if let Some(e) = mean(self.energy.iter().copied()) {
            out.push(Measurement::new("energy_level", e, "level", SRC_ENERGY));
        }
        if let Some(c) = mean(self.cpu.iter().map(|c| c.0)) {
            out.push(Measurement::new("cpu_pct", c, "%", SRC_CPU));
        }
        if let Some(m) = mean(self.cpu.iter().map(|c| c.1 / 1_048_576.0)) {
            out.push(Measurement::new("memory_mb", m, "MB", SRC_MEMORY));
        }
        if let Some(p) = self.packets {
            out.push(Measurement::new("net_packets", p.packets as f64, "count", SRC_PACKETS));
            out.push(Measurement::new("net_bytes", p.bytes as f64, "bytes", SRC_PACKETS));
            if with_requests {
                out.push(Measurement::new("requests", p.requests as f64, "count", SRC_REQUESTS));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(ip: Vec<u8>) -> DevicePacket {
        let mut data = vec![0xbe; 12];
        data.extend([0x08, 0x00]);
        data.extend(ip);
        DevicePacket {
            header_length: 95,
            header_version: 2,
            packet_length: (data.len() - 14) as u32,
            interface_type: 6,
            unit: 0,
            io: 1,
            protocol_family: 2,
            frame_pre_length: 0,
            frame_post_length: 0,
            interface_name: "en0".into(),
            pid: 1001,
            comm: "Envoy".into(),
            svc: 0,
            epid: 1001,
            ecomm: "Envoy".into(),
            seconds: 0,
            microseconds: 0,
            data,
        }
    }

    /// IPv4 (20 bytes) + TCP (20 bytes, or 32 with options) to `port`, then `payload`.
    fn tcp4(port: u16, options: bool, payload: &[u8]) -> Vec<u8> {
        let tcp_len = if options { 32 } else { 20 };
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0, 192, 0, 2, 1, 192, 0, 2, 10];
        let total = (20 + tcp_len + payload.len()) as u16;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        let mut tcp = vec![0u8; tcp_len];
        tcp[0..2].copy_from_slice(&50000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&port.to_be_bytes());
        tcp[12] = ((tcp_len / 4) as u8) << 4;
        ip.extend(tcp);
        ip.extend(payload);
        ip
    }

    #[test]
    fn an_http_request_line_to_the_endpoints_port_is_a_request_and_nothing_else_is() {
        let get = b"GET /t/abc HTTP/1.1\r\nHost: lab\r\n\r\n";
        assert!(is_http_request(&packet(tcp4(8765, false, get)), 8765));
        assert!(is_http_request(&packet(tcp4(8765, true, b"POST /t/abc/state HTTP/1.1\r\n")), 8765), "TCP options");
        assert!(!is_http_request(&packet(tcp4(443, false, get)), 8765), "another port");
        assert!(!is_http_request(&packet(tcp4(8765, false, b"HTTP/1.1 200 OK\r\n")), 8765), "a response");
        assert!(!is_http_request(&packet(tcp4(8765, false, b"")), 8765), "a bare ACK");
        let mut udp = tcp4(8765, false, get);
        udp[9] = 17;
        assert!(!is_http_request(&packet(udp), 8765), "not TCP");
        assert!(!is_http_request(&packet(vec![0x45, 0, 0]), 8765), "truncated");
        // IPv6: 40-byte header, next header TCP.
        let v4 = tcp4(8765, false, get);
        let mut v6 = vec![0x60, 0, 0, 0, 0, 0, 6, 64];
        v6.extend([0u8; 32]);
        v6.extend(&v4[20..]);
        assert!(is_http_request(&packet(v6), 8765));
    }

    #[test]
    fn a_sysmontap_row_is_read_by_the_order_of_the_attributes_asked_for() {
        let mut ps = plist::Dictionary::new();
        let row = |pid: i64, cpu: f64, mem: i64| {
            Value::Array(vec![Value::Integer(pid.into()), Value::Real(cpu), Value::Integer(mem.into())])
        };
        ps.insert("1001".into(), row(1001, 185.2, 12 * 1_048_576));
        ps.insert("57".into(), row(57, 3.0, 40 * 1_048_576));
        assert_eq!(process_row(&ps, 1001), Some((185.2, 12.0 * 1_048_576.0)));
        assert_eq!(process_row(&ps, 999), None);
        ps.insert("7".into(), Value::Array(vec![Value::Integer(7.into())]));
        assert_eq!(process_row(&ps, 7), None, "a short row is skipped, not misread");
    }

    #[test]
    fn figures_are_means_and_requests_come_only_with_the_endpoint() {
        let g = Gathered {
            energy: vec![10.0, 14.0],
            cpu: vec![(180.0, 12.0 * 1_048_576.0), (190.0, 14.0 * 1_048_576.0)],
            packets: Some(Packets { packets: 40, bytes: 4000, requests: 10 }),
            problems: vec![],
        };
        let got: Vec<(String, f64, String)> =
            g.measurements(true).into_iter().map(|m| (m.metric, m.value, m.source)).collect();
        assert_eq!(
            got,
            [
                ("energy_level".into(), 12.0, SRC_ENERGY.into()),
                ("cpu_pct".into(), 185.0, SRC_CPU.into()),
                ("memory_mb".into(), 13.0, SRC_MEMORY.into()),
                ("net_packets".into(), 40.0, SRC_PACKETS.into()),
                ("net_bytes".into(), 4000.0, SRC_PACKETS.into()),
                ("requests".into(), 10.0, SRC_REQUESTS.into()),
            ]
        );
        assert!(!g.measurements(false).iter().any(|m| m.metric == "requests"));
        assert!(Gathered::default().measurements(true).is_empty(), "no samples, no figures");
    }
}
