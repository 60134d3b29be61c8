//! The server: one thread per connection, one shared instrument.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Value, json};

/// The main current's sample rate until set (the Arc's only one over TCP).
pub const RATE_HZ: f64 = 4000.0;
/// The rates an Ace's main current can be set to.
const ACE_RATES: [u64; 4] = [1000, 4000, 10_000, 50_000];
/// The Arc's main output range, volts, and its largest current limit, amperes.
const VOLTS: (f64, f64) = (0.5, 4.55);
/// The Ace's.
const ACE_VOLTS: (f64, f64) = (0.5, 25.0);
const MAX_AMPS: f64 = 5.0;
/// The most samples one `recording_get_channel_data` gives (the client asks ≤ 40 000).
const MAX_CHUNK: u64 = 100_000;

pub struct Config {
    pub port: u16,
    pub state: Option<PathBuf>,
    pub device_name: String,
    pub base_ma: f64,
    pub pulse_ma: f64,
    pub every_s: f64,
    pub width_s: f64,
    /// Hang up every open connection this long after the first recording starts (once):
    /// a lost connection, with the server and its licences as they were.
    pub hang_up_after_s: Option<f64>,
    /// Licences another user holds (of the two the server has).
    pub others_hold: usize,
    /// "Arc" or "Ace".
    pub device_type: String,
    /// The device's draw grows by this much every second of a recording, mA/s: a draw
    /// that is not periodic, so a window put in the wrong place gives the wrong energy.
    pub ramp_ma_per_s: f64,
    /// Faults of the instrument, on each recording's own clock (seconds from its first
    /// sample): sampling begins this long after `project_start_recording` is answered.
    pub late_start_s: f64,
    /// The samples of this span are sent as `null`.
    pub null_s: Option<(f64, f64)>,
    /// The samples of this span are never delivered: the count leaves them out, and the
    /// chunk after them says, by its `timestamp`, where the samples resume.
    pub drop_s: Option<(f64, f64)>,
    /// Sampling stops this long into each recording (the recording runs on, empty).
    pub sample_for_s: Option<f64>,
}

impl Config {
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut c = Config {
            port: 1905,
            state: None,
            device_name: "Arc".into(),
            base_ma: 100.0,
            pulse_ma: 400.0,
            every_s: 1.0,
            width_s: 0.1,
            hang_up_after_s: None,
            others_hold: 0,
            device_type: "Arc".into(),
            ramp_ma_per_s: 0.0,
            late_start_s: 0.0,
            null_s: None,
            drop_s: None,
            sample_for_s: None,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = || it.next().cloned().ok_or(format!("{a} needs a value"));
            let number = |v: String| v.parse::<f64>().map_err(|_| format!("{a}: not a number: {v}"));
            let span = |v: String| -> Result<(f64, f64), String> {
                let (from, to) = v.split_once(':').ok_or(format!("{a}: FROM:TO seconds, not {v}"))?;
                Ok((number(from.into())?, number(to.into())?))
            };
            match a.as_str() {
                "--port" => c.port = value()?.parse().map_err(|_| format!("{a}: not a port"))?,
                "--state" => c.state = Some(PathBuf::from(value()?)),
                "--device-name" => c.device_name = value()?,
                "--base-ma" => c.base_ma = number(value()?)?,
                "--pulse-ma" => c.pulse_ma = number(value()?)?,
                "--pulse-every-s" => c.every_s = number(value()?)?,
                "--pulse-width-s" => c.width_s = number(value()?)?,
                "--hang-up-after-s" => c.hang_up_after_s = Some(number(value()?)?),
                "--type" => c.device_type = value()?,
                "--ramp-ma-per-s" => c.ramp_ma_per_s = number(value()?)?,
                "--late-start-s" => c.late_start_s = number(value()?)?,
                "--null-s" => c.null_s = Some(span(value()?)?),
                "--drop-s" => c.drop_s = Some(span(value()?)?),
                "--sample-for-s" => c.sample_for_s = Some(number(value()?)?),
                "--others-hold" => c.others_hold = value()?.parse().map_err(|_| format!("{a}: not a count"))?,
                other => return Err(format!("unknown argument {other}")),
            }
        }
        Ok(c)
    }

    /// The device's draw `t` s after a recording was started (answered), amperes: the
    /// device's own time, whenever the instrument samples it.
    fn draw(&self, t: f64) -> f64 {
        let pulse = if self.every_s > 0.0 && t.rem_euclid(self.every_s) < self.width_s { self.pulse_ma } else { 0.0 };
        (self.base_ma + pulse + self.ramp_ma_per_s * t) / 1000.0
    }
}

struct Recording {
    id: i64,
    /// When `project_start_recording` was answered.
    start: Instant,
    /// When its first sample was taken (`--late-start-s` after `start`).
    sampling: Instant,
    stop: Option<Instant>,
    markers: Vec<Marker>,
    /// The last `to` a channel-info request was told, and when (seconds after `start`).
    told: Option<(f64, f64)>,
}

struct Marker {
    text: String,
    /// The time the client gave, on the recording's clock.
    timestamp: f64,
    /// When the server got it, seconds after `start`.
    received_s: f64,
    /// When the server told the time the marker carries (a channel info's `to`), seconds
    /// after `start`: when the marker was placed, on the device's own time.
    placed_s: Option<f64>,
}

/// A licence is the logged-in user's once reserved, as on Otii 3: a connection that ends
/// does not return it; any connection of that user may (the stand-in has one user, "lab").
struct Licence {
    id: i64,
    /// The peer that reserved it.
    owner: Option<String>,
    /// Another user holds it: not available here.
    other: bool,
}

struct Instrument {
    config: Config,
    /// The main current's sample rate, Hz.
    rate: f64,
    device_id: String,
    logged_in: bool,
    licences: Vec<Licence>,
    voltage: f64,
    max_current: f64,
    channels: Vec<String>,
    /// Main output switched on or off, and when.
    main: Vec<(Instant, bool)>,
    project: Option<i64>,
    recordings: Vec<Recording>,
    commands: Vec<String>,
}

impl Instrument {
    fn main_on_at(&self, at: Instant) -> bool {
        self.main.iter().rev().find(|(t, _)| *t <= at).is_some_and(|(_, on)| *on)
    }

    /// The samples `r` has taken so far (its own clock: sample k at k / rate), with the
    /// dropped ones among them.
    fn taken(&self, r: &Recording) -> u64 {
        if !self.channels.iter().any(|c| c == "mc") {
            return 0;
        }
        let end = r.stop.unwrap_or_else(Instant::now);
        let mut n = (end.saturating_duration_since(r.sampling).as_secs_f64() * self.rate).floor() as u64;
        if let Some(s) = self.config.sample_for_s {
            n = n.min((s * self.rate).floor() as u64);
        }
        n
    }

    /// The samples `--drop-s` leaves out: [first, end) of the taken ones.
    fn dropped(&self) -> (u64, u64) {
        self.config.drop_s.map_or((0, 0), |(a, b)| ((a * self.rate).ceil() as u64, (b * self.rate).ceil() as u64))
    }

    /// The samples delivered: those taken less the dropped.
    fn count(&self, r: &Recording) -> u64 {
        let taken = self.taken(r);
        let (a, b) = self.dropped();
        taken - b.min(taken).saturating_sub(a)
    }

    /// The taken sample that delivered sample `i` is.
    fn taken_index(&self, i: u64) -> u64 {
        let (a, b) = self.dropped();
        if i < a { i } else { i + (b - a) }
    }

    /// The delivered samples of recording `r` from `index`, at most `count`, as one run of
    /// evenly spaced samples (so a read stops where dropped ones begin): the taken index
    /// of the first, and the values (`None`: sent as `null`).
    fn samples(&self, r: &Recording, index: u64, count: u64) -> (u64, Vec<Option<f64>>) {
        let mut end = (index + count).min(self.count(r));
        let (a, b) = self.dropped();
        if index < a && b > a {
            end = end.min(a);
        }
        let first = self.taken_index(index);
        let late = r.sampling.duration_since(r.start).as_secs_f64();
        let values = (first..first + end.saturating_sub(index))
            .map(|k| {
                let t = k as f64 / self.rate;
                if self.config.null_s.is_some_and(|(from, to)| t >= from && t < to) {
                    return None;
                }
                let at = r.sampling + std::time::Duration::from_secs_f64(t);
                Some(if self.main_on_at(at) { self.config.draw(late + t) } else { 0.0 })
            })
            .collect();
        (first, values)
    }

    /// The end of `r`'s samples on its clock, seconds: where its last delivered one ends.
    fn data_end(&self, r: &Recording) -> f64 {
        match self.count(r) {
            0 => 0.0,
            n => (self.taken_index(n - 1) + 1) as f64 / self.rate,
        }
    }

    fn state(&self) -> Value {
        json!({
            "licences": self.licences.iter().map(|l| json!({"id": l.id, "reserved": l.owner.is_some()})).collect::<Vec<_>>(),
            "logged_in": self.logged_in,
            "voltage": self.voltage,
            "max_current": self.max_current,
            "channels": self.channels,
            "sample_rate": self.rate,
            "main_on": self.main.last().is_some_and(|(_, on)| *on),
            "recordings": self.recordings.iter().map(|r| json!({
                "id": r.id,
                "running": r.stop.is_none(),
                "seconds": r.stop.unwrap_or_else(Instant::now).duration_since(r.start).as_secs_f64(),
                "late_s": r.sampling.duration_since(r.start).as_secs_f64(),
                "markers": r.markers.iter().map(|m| json!({
                    "text": m.text, "timestamp": m.timestamp, "received_s": m.received_s, "placed_s": m.placed_s,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "commands": self.commands,
        })
    }
}

pub fn serve(config: Config) -> Result<(), String> {
    let listener = TcpListener::bind(("127.0.0.1", config.port)).map_err(|e| format!("listening: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let state = config.state.clone();
    let licences = (1..=2).map(|id| Licence { id, owner: None, other: id <= config.others_hold as i64 }).collect();
    let instrument = Arc::new(Mutex::new(Instrument {
        device_id: format!("Arc5120{:016X}", 0x4F54_4949u64),
        config,
        rate: RATE_HZ,
        logged_in: true,
        licences,
        voltage: 3.3,
        max_current: MAX_AMPS,
        channels: Vec::new(),
        main: Vec::new(),
        project: None,
        recordings: Vec::new(),
        commands: Vec::new(),
    }));
    write_state(&instrument, state.as_ref());
    // Announced once the state file is there: a test reads it as soon as it knows the port.
    println!("listening on {addr}");
    let _ = std::io::stdout().flush();
    let open: Open = Arc::new(Mutex::new(Vec::new()));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        if let Ok(copy) = stream.try_clone() {
            open.lock().unwrap_or_else(|p| p.into_inner()).push(copy);
        }
        let (instrument, state, open) = (instrument.clone(), state.clone(), open.clone());
        std::thread::spawn(move || session(stream, &open, &instrument, state.as_ref()));
    }
    Ok(())
}

fn write_state(instrument: &Mutex<Instrument>, path: Option<&PathBuf>) {
    let Some(path) = path else { return };
    let text = instrument.lock().unwrap_or_else(|p| p.into_inner()).state().to_string();
    // Whole or not at all: a reader never sees half a file.
    let tmp = path.with_extension("tmp");
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(tmp, path);
    }
}

/// The connections accepted, for `--hang-up-after-s`.
type Open = Arc<Mutex<Vec<TcpStream>>>;

/// Shuts every open connection down `after_s` from now, on a thread of its own.
fn hang_up_later(open: &Open, after_s: f64) {
    let open = open.clone();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs_f64(after_s));
        for s in open.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    });
}

fn session(stream: TcpStream, open: &Open, instrument: &Mutex<Instrument>, state: Option<&PathBuf>) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let Ok(mut out) = stream.try_clone() else { return };
    let greeting = json!({"type": "information", "info": "connected",
        "data": {"otii_version": "3.5.5", "protocol_version": "0.1", "server": "otii-server (lab stand-in)"}});
    if send(&mut out, &greeting).is_err() {
        return;
    }
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        // CRLF-delimited: a line without its CR is not a message of this protocol.
        let Some(text) = line.strip_suffix(b"\r\n") else { continue };
        let reply = match serde_json::from_slice::<Value>(text) {
            Ok(request) => {
                let mut i = instrument.lock().unwrap_or_else(|p| p.into_inner());
                let reply = reply(&mut i, &peer, &request);
                if reply["cmd"] == "project_start_recording"
                    && reply["type"] == "response"
                    && let Some(after) = i.config.hang_up_after_s.take()
                {
                    hang_up_later(open, after);
                }
                reply
            }
            Err(e) => json!({"type": "error", "cmd": "", "trans_id": "", "errorcode": "Not able to parse request",
                "data": {"parse_error": e.to_string(), "data": String::from_utf8_lossy(text)}}),
        };
        write_state(instrument, state);
        if send(&mut out, &reply).is_err() {
            return;
        }
    }
}

fn send(out: &mut TcpStream, message: &Value) -> std::io::Result<()> {
    out.write_all(format!("{message}\r\n").as_bytes())
}

/// An error reply: `errorcode` and the fields Qoitech's clients read for it.
struct Refusal(&'static str, Value);

fn missing(key: &str) -> Refusal {
    Refusal("Missing key in request", json!({"key": key}))
}

fn reply(i: &mut Instrument, peer: &str, request: &Value) -> Value {
    let cmd = request["cmd"].as_str().unwrap_or_default().to_string();
    let trans_id = request.get("trans_id").cloned().unwrap_or(Value::Null);
    i.commands.push(cmd.clone());
    let data = request.get("data").cloned().unwrap_or(Value::Null);
    match handle(i, peer, &cmd, &data) {
        Ok(Some(d)) => json!({"type": "response", "cmd": cmd, "trans_id": trans_id, "data": d}),
        Ok(None) => json!({"type": "response", "cmd": cmd, "trans_id": trans_id}),
        Err(Refusal(code, d)) => {
            json!({"type": "error", "cmd": cmd, "trans_id": trans_id, "errorcode": code, "data": d})
        }
    }
}

fn handle(i: &mut Instrument, peer: &str, cmd: &str, data: &Value) -> Result<Option<Value>, Refusal> {
    let get = |key: &str| data.get(key).ok_or_else(|| missing(key));
    let number = |key: &str| get(key)?.as_f64().ok_or_else(|| wrong_type(key, "number", &data[key]));
    let integer = |key: &str| get(key)?.as_i64().ok_or_else(|| wrong_type(key, "integer", &data[key]));
    let text = |key: &str| get(key)?.as_str().map(str::to_string).ok_or_else(|| wrong_type(key, "string", &data[key]));
    let holds = i.licences.iter().any(|l| l.owner.is_some() && !l.other);
    let needs_licence = ["arc_", "project_", "recording_"].iter().any(|p| cmd.starts_with(p))
        || matches!(cmd, "otii_create_project" | "otii_get_active_project");
    if needs_licence && !holds {
        return Err(Refusal("No license", Value::Null));
    }
    if cmd.starts_with("arc_") && text("device_id")? != i.device_id {
        return Err(Refusal("Device not connected", json!({"device_id": data["device_id"]})));
    }
    let recording = |i: &Instrument| -> Result<usize, Refusal> {
        let id = integer("recording_id")?;
        i.recordings
            .iter()
            .position(|r| r.id == id)
            .ok_or(Refusal("Invalid key value", json!({"key": "recording_id", "value": id})))
    };
    Ok(match cmd {
        "otii_is_logged_in" => Some(json!({"logged_in": i.logged_in})),
        "otii_login" => {
            text("username")?;
            text("password")?;
            i.logged_in = true;
            None
        }
        "otii_logout" => {
            i.logged_in = false;
            None
        }
        "otii_get_licenses" => Some(json!({"licenses": i.licences.iter().map(|l| {
            json!({"id": l.id, "type": "Automation", "available": !l.other,
                   "reserved_to": if l.other { "someone-else" } else if l.owner.is_some() { "lab" } else { "" },
                   "hostname": l.owner.as_deref().unwrap_or(""), "addons": []})
        }).collect::<Vec<_>>()})),
        "otii_has_license" => Some(json!({"has_license": holds})),
        "otii_reserve_license" => {
            if !i.logged_in {
                return Err(Refusal("Not logged in", Value::Null));
            }
            let id = integer("license_id")?;
            let l = i
                .licences
                .iter_mut()
                .find(|l| l.id == id && !l.other)
                .ok_or(Refusal("License could not be reserved", Value::Null))?;
            l.owner = Some(peer.to_string());
            None
        }
        "otii_return_license" => {
            let id = integer("license_id")?;
            let l = i
                .licences
                .iter_mut()
                .find(|l| l.id == id && !l.other)
                .ok_or(Refusal("License could not be returned", Value::Null))?;
            if l.owner.is_none() {
                return Err(Refusal("License could not be returned", Value::Null));
            }
            l.owner = None;
            None
        }
        "otii_get_devices" => Some(
            json!({"devices": [{"device_id": i.device_id, "name": i.config.device_name, "type": i.config.device_type}]}),
        ),
        "otii_get_device_id" => {
            if text("device_name")? != i.config.device_name {
                return Err(Refusal("Invalid key value", json!({"key": "device_name", "value": data["device_name"]})));
            }
            Some(json!({"device_id": i.device_id}))
        }
        "arc_get_version" => Some(json!({"hw_version": "Arc 1.1", "fw_version": "1.2.4 (lab stand-in)"})),
        "arc_is_connected" => Some(json!({"connected": true})),
        "arc_set_main_voltage" => {
            let v = number("value")?;
            let (lo, hi) = if i.config.device_type == "Ace" { ACE_VOLTS } else { VOLTS };
            if !(lo..=hi).contains(&v) {
                return Err(Refusal("Invalid key value", json!({"key": "value", "value": v})));
            }
            i.voltage = v;
            None
        }
        "arc_get_main_voltage" => Some(json!({"value": i.voltage})),
        "arc_set_max_current" => {
            let a = number("value")?;
            if !(0.001..=MAX_AMPS).contains(&a) {
                return Err(Refusal("Invalid key value", json!({"key": "value", "value": a})));
            }
            i.max_current = a;
            None
        }
        "arc_get_max_current" => Some(json!({"value": i.max_current})),
        "arc_enable_channel" => {
            let (channel, on) = (text("channel")?, get("enable")?.as_bool().unwrap_or(false));
            i.channels.retain(|c| *c != channel);
            if on {
                i.channels.push(channel);
            }
            None
        }
        "arc_get_channel_samplerate" => {
            text("channel")?;
            Some(json!({"value": i.rate as u64}))
        }
        "arc_set_channel_samplerate" => {
            if i.config.device_type != "Ace" {
                return Err(Refusal("Command not valid for device type", Value::Null));
            }
            let (channel, value) = (text("channel")?, integer("value")?);
            if channel != "mc" || !ACE_RATES.contains(&(value as u64)) {
                return Err(Refusal("Invalid key value", json!({"key": "value", "value": value})));
            }
            i.rate = value as f64;
            None
        }
        "arc_set_main" => {
            let on = get("enable")?.as_bool().ok_or_else(|| wrong_type("enable", "boolean", &data["enable"]))?;
            i.main.push((Instant::now(), on));
            None
        }
        "arc_get_value" => {
            let on = i.main_on_at(Instant::now());
            let v = match text("channel")?.as_str() {
                "mc" if on => i.config.draw(0.0),
                "mv" if on => i.voltage,
                _ => 0.0,
            };
            Some(json!({"value": v}))
        }
        "otii_create_project" => {
            let id = i.project.map_or(1, |p| p + 1);
            i.project = Some(id);
            i.recordings.clear();
            Some(json!({"project_id": id}))
        }
        "otii_get_active_project" => Some(json!({"project_id": i.project.unwrap_or(-1)})),
        "project_start_recording" | "project_stop_recording" | "project_get_last_recording" => {
            if Some(integer("project_id")?) != i.project {
                return Err(Refusal("Project does not exist", Value::Null));
            }
            match cmd {
                "project_start_recording" => {
                    if i.recordings.iter().any(|r| r.stop.is_none()) {
                        return Err(Refusal("Command failure", json!({"message": "a recording is running"})));
                    }
                    let id = i.recordings.len() as i64 + 1;
                    let start = Instant::now();
                    let sampling = start + std::time::Duration::from_secs_f64(i.config.late_start_s.max(0.0));
                    i.recordings.push(Recording { id, start, sampling, stop: None, markers: Vec::new(), told: None });
                    None
                }
                "project_stop_recording" => {
                    let r = i.recordings.iter_mut().find(|r| r.stop.is_none());
                    r.ok_or(Refusal("Command failure", json!({"message": "no recording is running"})))?.stop =
                        Some(Instant::now());
                    None
                }
                _ => Some(match i.recordings.last() {
                    Some(r) => {
                        json!({"recording_id": r.id, "name": format!("Recording {}", r.id), "running": r.stop.is_none()})
                    }
                    None => json!({"recording_id": -1, "name": ""}),
                }),
            }
        }
        "recording_is_running" => {
            let r = recording(i)?;
            Some(json!({"running": i.recordings[r].stop.is_none()}))
        }
        "recording_log" => {
            let r = recording(i)?;
            let message = text("text")?;
            let at = data.get("timestamp").and_then(Value::as_f64).unwrap_or(0.0);
            let rec = &mut i.recordings[r];
            // 0: now, on the recording's clock.
            let now = Instant::now();
            let at = if at == 0.0 { now.saturating_duration_since(rec.sampling).as_secs_f64() } else { at };
            let received_s = now.duration_since(rec.start).as_secs_f64();
            let placed_s = rec.told.filter(|(to, _)| (to - at).abs() < 1e-9).map(|(_, when)| when);
            rec.markers.push(Marker { text: message, timestamp: at, received_s, placed_s });
            None
        }
        "recording_get_channel_data_count"
        | "recording_get_channel_data"
        | "recording_get_channel_info"
        | "recording_get_channel_statistics" => {
            let r = recording(i)?;
            let channel = text("channel")?;
            if channel != "mc" {
                return Err(Refusal("Invalid key value", json!({"key": "channel", "value": channel})));
            }
            let rec = &i.recordings[r];
            let total = i.count(rec);
            match cmd {
                "recording_get_channel_data_count" => Some(json!({"count": total})),
                // Live while recording: where the samples end so far.
                "recording_get_channel_info" => {
                    let to = i.data_end(rec);
                    let when = rec.start.elapsed().as_secs_f64();
                    i.recordings[r].told = Some((to, when));
                    Some(json!({"offset": 0.0, "from": 0.0, "to": to, "sample_rate": i.rate as u64}))
                }
                "recording_get_channel_data" => {
                    let (index, count) = (integer("index")?, integer("count")?);
                    if index < 0 || count < 0 || count as u64 > MAX_CHUNK {
                        return Err(Refusal("Invalid key value", json!({"key": "count", "value": count})));
                    }
                    let (first, values) = i.samples(rec, index as u64, count as u64);
                    Some(
                        json!({"data_type": "analog", "timestamp": first as f64 / i.rate, "interval": 1.0 / i.rate, "values": values}),
                    )
                }
                _ => {
                    let (from, to) = (number("from")?, number("to")?);
                    let first = (from * i.rate).ceil().max(0.0) as u64;
                    let last = ((to * i.rate).ceil() as u64).min(total);
                    let values: Vec<f64> =
                        i.samples(rec, first, last.saturating_sub(first)).1.into_iter().flatten().collect();
                    let (lo, hi) = values.iter().fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
                    let charge: f64 = values.iter().sum::<f64>() / i.rate;
                    let average = if values.is_empty() { 0.0 } else { charge * i.rate / values.len() as f64 };
                    Some(
                        json!({"min": lo, "max": hi, "average": average, "energy": charge * i.voltage, "charge": charge}),
                    )
                }
            }
        }
        _ => return Err(Refusal("Invalid command", Value::Null)),
    })
}

fn wrong_type(key: &str, expected: &str, got: &Value) -> Refusal {
    let received = match got {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    Refusal("Invalid key type", json!({"key": key, "expected_type": expected, "received_type": received}))
}
