//! Instruments' remote server (com.apple.instruments.remoteserver and its
//! DVTSecureSocketProxy name), the part that starts and stops apps: DTX over the service's
//! stream. The phone announces its capabilities first; the host opens channels with
//! `_requestChannelWithCode:identifier:` on channel 0; on the process-control channel
//! `launchSuspendedProcessWithDevicePath:bundleIdentifier:environment:arguments:options:`
//! answers a pid, `killPid:` stops it and `requestDisableMemoryLimitsForPid:` answers
//! whether the pid runs. What runs is in processes.rs. The energy gauge (energy.rs) and
//! the system monitor tap (sysmontap.rs) are channels too; the tap's samples are pushed
//! from a thread of its own, so every message goes out through one shared writer.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use plist::{Dictionary, Value};

use crate::Server;
use crate::archive::{self, NsError};
use crate::dtx::{Aux, Dtx, KIND_ERROR, KIND_OBJECT, KIND_OK};
use crate::duplex::Duplex;
use crate::energy::{self, Energy};
use crate::processes::{Process, Processes};
use crate::sysmontap::{self, Tap};

pub const JOURNAL: &str = "dvt";
pub const PROCESS_CONTROL: &str = "com.apple.instruments.server.services.processcontrol";
/// Device info: `isRunningPid:` (what the lab asks at collection).
pub const DEVICE_INFO: &str = "com.apple.instruments.server.services.deviceinfo";
const LAUNCH: &str = "launchSuspendedProcessWithDevicePath:bundleIdentifier:environment:arguments:options:";

/// What a call gets back: an empty acknowledgement, a value (or one archived already),
/// or an NSError.
enum Answer {
    Ok,
    Value(Value),
    Archive(Vec<u8>),
    Error(NsError),
}

/// The phone's own capabilities, sent as soon as the host connects (both peers do).
fn capabilities() -> Dtx {
    let caps: Dictionary = [
        ("com.apple.private.DTXConnection", 1),
        // No compressed messages are sent.
        ("com.apple.private.DTXBlockCompression", 0),
        (PROCESS_CONTROL, 1),
        (DEVICE_INFO, 1),
        (energy::SERVICE, 1),
        (sysmontap::SERVICE, 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Value::Integer(v.into())))
    .collect();
    Dtx::call(
        1,
        0,
        archive::encode(&"_notifyOfPublishedCapabilities:".into()),
        vec![Aux::Buffer(archive::encode(&Value::Dictionary(caps)))],
    )
}

/// The service's own error for what it does not model (no capture of a real phone's).
fn unsupported(what: String) -> NsError {
    NsError {
        domain: "DTXMessage".into(),
        code: 1,
        info: vec![("NSLocalizedDescription".into(), what)],
        underlying: None,
    }
}

/// A launch of a bundle the phone does not have: FrontBoard's NotFound inside the
/// request's InvalidRequest (as WebDriverAgent reports it, appium/WebDriverAgent#706),
/// wrapped by the process-control service's domain (go-ios ios/instruments/processcontrol.go).
fn not_installed(bundle_id: &str) -> NsError {
    let nil = format!("Application info provider (FBSApplicationLibrary) returned nil for \"{bundle_id}\"");
    let frontboard = NsError {
        domain: "FBSOpenApplicationErrorDomain".into(),
        code: 4,
        info: vec![
            ("BSErrorCodeDescription".into(), "NotFound".into()),
            ("NSLocalizedFailureReason".into(), nil.clone()),
        ],
        underlying: None,
    };
    let open = NsError {
        domain: "FBSOpenApplicationServiceErrorDomain".into(),
        code: 4,
        info: vec![
            ("BSErrorCodeDescription".into(), "InvalidRequest".into()),
            ("NSLocalizedDescription".into(), format!("The request to open \"{bundle_id}\" failed.")),
        ],
        underlying: Some(Box::new(frontboard)),
    };
    NsError {
        domain: "com.apple.dt.deviceprocesscontrolservice".into(),
        code: 4,
        info: vec![
            ("NSLocalizedDescription".into(), format!("Request to launch {bundle_id} failed.")),
            ("NSLocalizedFailureReason".into(), nil),
        ],
        underlying: Some(Box::new(open)),
    }
}

fn to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::String(s) => s.clone().into(),
        Value::Boolean(b) => (*b).into(),
        Value::Integer(i) => i.as_signed().map_or_else(|| i.as_unsigned().into(), Into::into),
        Value::Real(r) => (*r).into(),
        Value::Array(a) => a.iter().map(to_json).collect(),
        Value::Dictionary(d) => serde_json::Value::Object(d.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()),
        other => format!("{other:?}").into(),
    }
}

/// The archived argument `i` of a call.
fn archived(m: &Dtx, i: usize) -> io::Result<Value> {
    match m.aux.get(i) {
        Some(Aux::Buffer(b)) => archive::decode(b),
        Some(Aux::String(s)) => Ok(Value::String(s.clone())),
        other => Err(io::Error::new(io::ErrorKind::InvalidData, format!("argument {i}: {other:?}"))),
    }
}

fn integer(m: &Dtx, i: usize) -> Option<u64> {
    match m.aux.get(i) {
        Some(Aux::U32(n)) => Some(u64::from(*n)),
        Some(Aux::I64(n)) => u64::try_from(*n).ok(),
        _ => None,
    }
}

/// The phone's side of the stream's writing half, shared with the threads that push.
struct Out {
    stream: Mutex<Box<dyn Write + Send>>,
    /// Identifiers of the phone's own messages (1 was its capabilities).
    next: AtomicU32,
}

impl Out {
    fn send(&self, m: &Dtx) -> io::Result<()> {
        let mut s = self.stream.lock().unwrap();
        s.write_all(&m.encode())?;
        s.flush()
    }

    /// A message of the phone's on the host's channel `code` (sent as its negation), an
    /// object without a selector, asking no reply.
    fn push(&self, code: i32, payload: Vec<u8>) -> io::Result<()> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.send(&Dtx { kind: KIND_OBJECT, ..Dtx::call(id, -code, payload, Vec::new()) })
    }
}

/// A channel the host opened, with the service's state.
enum Channel {
    ProcessControl,
    DeviceInfo,
    Energy(Energy),
    Sysmontap { config: sysmontap::Config, tap: Option<Tap> },
}

impl Channel {
    fn open(identifier: &str) -> Option<Channel> {
        match identifier {
            PROCESS_CONTROL => Some(Channel::ProcessControl),
            DEVICE_INFO => Some(Channel::DeviceInfo),
            energy::SERVICE => Some(Channel::Energy(Energy::default())),
            sysmontap::SERVICE => Some(Channel::Sysmontap { config: sysmontap::Config::default(), tap: None }),
            _ => None,
        }
    }
}

/// The pids of a `…ForPIDs:` argument (an archived NSArray of NSNumber).
fn pids(m: &Dtx, i: usize) -> io::Result<Vec<u64>> {
    Ok(match archived(m, i)? {
        Value::Array(a) => a.iter().filter_map(Value::as_unsigned_integer).collect(),
        _ => Vec::new(),
    })
}

struct Session<'a> {
    server: &'a Arc<Server>,
    udid: &'a str,
    out: Arc<Out>,
    /// The channels the host opened, by its code.
    channels: HashMap<i32, Channel>,
}

impl Session<'_> {
    fn journal(&self, request: &str, args: serde_json::Value) {
        self.server.store.journal(self.udid, JOURNAL, request, args);
    }

    fn control(&mut self, selector: &str, m: &Dtx) -> io::Result<Answer> {
        Ok(match selector {
            "_notifyOfPublishedCapabilities:" => {
                let caps = archived(m, 0).ok().map(|c| to_json(&c)).unwrap_or_default();
                self.journal("capabilities", serde_json::json!({"capabilities": caps}));
                Answer::Ok
            }
            "_requestChannelWithCode:identifier:" => {
                let code = integer(m, 0).and_then(|c| i32::try_from(c).ok());
                let identifier = archived(m, 1)?.as_string().unwrap_or_default().to_string();
                self.journal("channel", serde_json::json!({"code": code, "identifier": identifier}));
                match (code, Channel::open(&identifier)) {
                    (Some(code), Some(channel)) => {
                        self.channels.insert(code, channel);
                        Answer::Ok
                    }
                    _ => Answer::Error(unsupported(format!("no service {identifier} on this stand-in"))),
                }
            }
            "_channelCanceled:" => {
                if let Some(code) = integer(m, 0).and_then(|c| i32::try_from(c).ok()) {
                    self.channels.remove(&code);
                }
                Answer::Ok
            }
            other => Answer::Error(unsupported(format!("unrecognized selector {other} on channel 0"))),
        })
    }

    fn process_control(&mut self, selector: &str, m: &Dtx) -> io::Result<Answer> {
        let store = &self.server.store;
        Ok(match selector {
            LAUNCH => {
                let bundle_id = archived(m, 1)?.as_string().unwrap_or_default().to_string();
                let env = match to_json(&archived(m, 2)?) {
                    serde_json::Value::Object(env) => env,
                    _ => serde_json::Map::new(),
                };
                let args: Vec<String> = match archived(m, 3)? {
                    Value::Array(a) => {
                        a.iter().map(|v| v.as_string().map_or_else(|| format!("{v:?}"), str::to_string)).collect()
                    }
                    _ => Vec::new(),
                };
                let options = archived(m, 4)?;
                let option = |k: &str| options.as_dictionary().and_then(|o| o.get(k)).and_then(Value::as_boolean);
                let phone = store
                    .phone(self.udid)?
                    .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{} detached", self.udid)))?;
                let app = store.apps(&phone)?.into_iter().find(|a| a.bundle_id == bundle_id);
                let mut line = serde_json::json!({"bundle_id": bundle_id, "env": env, "args": args,
                    "options": to_json(&options)});
                let Some(app) = app else {
                    let e = not_installed(&bundle_id);
                    line["error"] = e.info[0].1.clone().into();
                    self.journal("launch", line);
                    return Ok(Answer::Error(e));
                };
                let mut process = Process::of(&app, env, args, option("StartSuspendedKey") == Some(true));
                // KillExisting: the running copies go first.
                let kill = option("KillExisting") == Some(true);
                let (killed, pid) = Processes::update(store, self.udid, |p| p.launch(process.clone(), kill))?;
                line["pid"] = pid.into();
                line["killed"] = killed.into();
                self.journal("launch", line);
                process.pid = pid;
                crate::workload::start(self.server, self.udid, &process);
                Answer::Value(Value::Integer(pid.into()))
            }
            "killPid:" => {
                let pid = integer(m, 0).unwrap_or(0);
                let ran = Processes::update(store, self.udid, |p| p.kill(pid))?;
                self.journal("kill", serde_json::json!({"pid": pid, "running": ran}));
                Answer::Ok
            }
            "requestDisableMemoryLimitsForPid:" => {
                let pid = integer(m, 0).unwrap_or(0);
                let runs = Processes::load(store, self.udid)?.running.iter().any(|p| p.pid == pid);
                self.journal("disable_memory_limit", serde_json::json!({"pid": pid, "running": runs}));
                Answer::Value(Value::Boolean(runs))
            }
            other => Answer::Error(unsupported(format!("unrecognized selector {other} on {PROCESS_CONTROL}"))),
        })
    }

    fn device_info(&mut self, selector: &str, m: &Dtx) -> io::Result<Answer> {
        Ok(match selector {
            "isRunningPid:" => {
                // The pid comes archived (an NSNumber), or as a plain integer argument.
                let pid = archived(m, 0).ok().and_then(|v| v.as_unsigned_integer()).or_else(|| integer(m, 0));
                let runs = pid.is_some_and(|pid| {
                    Processes::load(&self.server.store, self.udid).is_ok_and(|p| p.running.iter().any(|r| r.pid == pid))
                });
                self.journal("is_running", serde_json::json!({"pid": pid, "running": runs}));
                Answer::Value(Value::Boolean(runs))
            }
            other => Answer::Error(unsupported(format!("unrecognized selector {other} on {DEVICE_INFO}"))),
        })
    }

    fn energy(&mut self, code: i32, selector: &str, m: &Dtx) -> io::Result<Answer> {
        let running = Processes::load(&self.server.store, self.udid)?.running;
        let Some(Channel::Energy(e)) = self.channels.get_mut(&code) else { unreachable!("an energy channel") };
        Ok(match selector {
            "startSamplingForPIDs:" => {
                let pids = pids(m, 0)?;
                e.start(&pids);
                self.journal("start_sampling", serde_json::json!({"pids": pids}));
                Answer::Ok
            }
            "stopSamplingForPIDs:" => {
                let pids = pids(m, 0)?;
                e.stop(&pids);
                self.journal("stop_sampling", serde_json::json!({"pids": pids}));
                Answer::Ok
            }
            "sampleAttributes:forPIDs:" => {
                let asked = pids(m, 1)?;
                let (reply, present) = e.sample(&asked, &running);
                self.journal("sample_attributes", serde_json::json!({"pids": asked, "present": present}));
                Answer::Archive(archive::encode_obj(&reply))
            }
            other => Answer::Error(unsupported(format!("unrecognized selector {other} on {}", energy::SERVICE))),
        })
    }

    fn sysmontap(&mut self, code: i32, selector: &str, m: &Dtx) -> io::Result<Answer> {
        let Some(Channel::Sysmontap { config, tap }) = self.channels.get_mut(&code) else {
            unreachable!("a sysmontap channel")
        };
        let line = match selector {
            "setConfig:" => {
                *config = sysmontap::Config::from_value(&archived(m, 0)?);
                serde_json::json!({"interval_ms": config.interval.as_millis() as u64,
                    "procAttrs": config.proc_attrs, "sysAttrs": config.sys_attrs})
            }
            "start" => {
                let out = Arc::clone(&self.out);
                // A second start restarts the tap (the old thread stops with its Tap).
                *tap = Some(sysmontap::start(self.server, self.udid, config.clone(), move |p| out.push(code, p))?);
                serde_json::json!({"interval_ms": config.interval.as_millis() as u64})
            }
            "stop" => {
                *tap = None;
                serde_json::json!({})
            }
            other => {
                return Ok(Answer::Error(unsupported(format!(
                    "unrecognized selector {other} on {}",
                    sysmontap::SERVICE
                ))));
            }
        };
        let request = match selector {
            "setConfig:" => "sysmontap_config",
            "start" => "sysmontap_start",
            _ => "sysmontap_stop",
        };
        self.journal(request, line);
        Ok(Answer::Ok)
    }

    /// The answer to a call of the host's, `None` for a message that is not a call.
    fn handle(&mut self, m: &Dtx) -> io::Result<Option<Answer>> {
        // Replies and acknowledgements of the host's (to nothing the phone asked) are dropped.
        if m.conversation % 2 == 1 || m.kind != crate::dtx::KIND_CALL {
            return Ok(None);
        }
        let selector = archive::decode(&m.payload)?;
        let selector = selector.as_string().unwrap_or_default();
        if m.channel == 0 {
            return self.control(selector, m).map(Some);
        }
        match self.channels.get(&m.channel) {
            Some(Channel::ProcessControl) => self.process_control(selector, m).map(Some),
            Some(Channel::DeviceInfo) => self.device_info(selector, m).map(Some),
            Some(Channel::Energy(_)) => self.energy(m.channel, selector, m).map(Some),
            Some(Channel::Sysmontap { .. }) => self.sysmontap(m.channel, selector, m).map(Some),
            None => Ok(Some(Answer::Error(unsupported(format!("no channel {}", m.channel))))),
        }
    }
}

/// One host's connection: the lockdown service's (a usbmuxd stream) or dtservicehub's (TCP
/// in the tunnel); the protocol is the same.
pub fn serve(mut s: impl Duplex, server: &Arc<Server>, udid: &str) -> io::Result<()> {
    let out = Arc::new(Out { stream: Mutex::new(Box::new(s.try_clone()?)), next: AtomicU32::new(2) });
    out.send(&capabilities())?;
    // Dropping the session (the host hung up) stops its taps.
    let mut session = Session { server, udid, out: Arc::clone(&out), channels: HashMap::new() };
    while let Some(m) = Dtx::read_from(&mut s)? {
        let Some(answer) = session.handle(&m)? else { continue };
        // A call that asks for no reply (killPid:) gets none, not even an error.
        if !m.expects_reply {
            continue;
        }
        let reply = match answer {
            Answer::Ok => m.reply(KIND_OK, Vec::new()),
            Answer::Value(v) => m.reply(KIND_OBJECT, archive::encode(&v)),
            Answer::Archive(bytes) => m.reply(KIND_OBJECT, bytes),
            Answer::Error(e) => m.reply(KIND_ERROR, archive::encode_error(&e)),
        };
        out.send(&reply)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_phone_announces_its_capabilities_on_channel_0_without_asking_a_reply() {
        let m = Dtx::read_from(&mut capabilities().encode().as_slice()).unwrap().unwrap();
        assert_eq!((m.channel, m.conversation, m.expects_reply), (0, 0, false));
        assert_eq!(archive::decode(&m.payload).unwrap().as_string(), Some("_notifyOfPublishedCapabilities:"));
        let caps = archived(&m, 0).unwrap();
        assert_eq!(caps.as_dictionary().unwrap()[PROCESS_CONTROL].as_signed_integer(), Some(1));
    }

    #[test]
    fn a_missing_bundle_is_frontboards_not_found_inside_the_launch_error() {
        let e = not_installed("com.x");
        assert_eq!((e.domain.as_str(), e.code), ("com.apple.dt.deviceprocesscontrolservice", 4));
        let open = e.underlying.as_ref().unwrap();
        let frontboard = open.underlying.as_ref().unwrap();
        assert_eq!(frontboard.domain, "FBSOpenApplicationErrorDomain");
        assert!(frontboard.info.contains(&("BSErrorCodeDescription".into(), "NotFound".into())));
        assert!(e.info[1].1.contains("returned nil for \"com.x\""), "{e:?}");
    }
}
