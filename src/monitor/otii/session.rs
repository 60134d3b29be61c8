//! A measuring session on one Otii instrument: an automation licence reserved first and
//! returned at the end (`close`), the supply set, the main current recorded around the
//! soak with markers at its start and end, and the samples read back as a `PowerTrace`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Connection, OtiiError};
use crate::collect::monitor::{PowerTrace, Voltage};

/// The licence types that allow automation (as Qoitech's client maps them).
const AUTOMATION: &[&str] = &["Automation", "All", "Admin", "Enterprise"];
/// Samples a read asks for (Qoitech's client asks 40 000 at a time).
const CHUNK: u64 = 40_000;

/// What a session sets on its instrument.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    pub voltage_v: f64,
    pub current_limit_a: f64,
    /// The instrument's name or id, where the server has several.
    pub device: Option<String>,
    /// The main current's sample rate, set where the instrument lets it be set (an Ace).
    pub sample_rate_hz: Option<u32>,
    /// How long each reply may take.
    pub timeout: Duration,
}

pub struct Session {
    conn: Connection,
    /// The licence this session reserved, to be returned.
    licence: Option<i64>,
    device_id: String,
    /// The instrument: its name, type and versions, for the manifest.
    pub identity: Value,
    project: i64,
    voltage_v: f64,
    /// The running recording, and when it started on this machine's clock (the middle of
    /// the start request's round trip).
    recording: Option<(i64, Instant)>,
}

impl Session {
    /// Connects, reserves a licence and sets the instrument up; on any failure after the
    /// reservation the licence is returned before the error is.
    pub async fn open(address: &str, settings: &SessionSettings) -> Result<Session, OtiiError> {
        Self::open_adopting(address, settings, None).await
    }

    /// [`open`](Self::open), after a session of this lab lost its connection holding
    /// licence `adopt`: a licence stays its user's when a connection ends (Otii 3), so that
    /// one, still reserved, is this session's to return.
    pub async fn open_adopting(
        address: &str,
        settings: &SessionSettings,
        adopt: Option<i64>,
    ) -> Result<Session, OtiiError> {
        let mut conn = Connection::connect(address, settings.timeout).await?;
        let licence = reserve(&mut conn, adopt).await?;
        match set_up(&mut conn, settings).await {
            Ok((device_id, identity, project)) => Ok(Session {
                conn,
                licence,
                device_id,
                identity,
                project,
                voltage_v: settings.voltage_v,
                recording: None,
            }),
            Err(e) => {
                if let Some(id) = licence {
                    let _ = conn.request("otii_return_license", json!({"license_id": id})).await;
                }
                Err(e)
            }
        }
    }

    /// Starts a recording with the main output on.
    pub async fn start(&mut self) -> Result<(), OtiiError> {
        self.conn.request("arc_set_main", json!({"device_id": self.device_id, "enable": true})).await?;
        let sent = Instant::now();
        self.conn.request("project_start_recording", json!({"project_id": self.project})).await?;
        let started = sent + sent.elapsed() / 2;
        let last = self.conn.request("project_get_last_recording", json!({"project_id": self.project})).await?;
        let id = last["recording_id"].as_i64().filter(|&id| id >= 0);
        let id = id.ok_or_else(|| OtiiError::Protocol(format!("no recording after it started: {last}")))?;
        self.recording = Some((id, started));
        Ok(())
    }

    /// The licence this session reserved (and will return), if it did.
    pub fn licence(&self) -> Option<i64> {
        self.licence
    }

    /// Puts a marker `text` in the recording, now; its time on the recording's clock.
    pub async fn mark(&mut self, text: &str) -> Result<f64, OtiiError> {
        let (id, started) = self.recording.ok_or_else(|| OtiiError::Protocol("a marker with no recording".into()))?;
        let at = started.elapsed().as_secs_f64();
        self.conn.request("recording_log", json!({"recording_id": id, "text": text, "timestamp": at})).await?;
        Ok(at)
    }

    /// Stops the recording (main output off) and reads its main current back.
    pub async fn stop(&mut self) -> Result<PowerTrace, OtiiError> {
        let (id, _) = self.recording.take().ok_or_else(|| OtiiError::Protocol("no recording to stop".into()))?;
        self.conn.request("project_stop_recording", json!({"project_id": self.project})).await?;
        self.conn.request("arc_set_main", json!({"device_id": self.device_id, "enable": false})).await?;
        let channel = json!({"recording_id": id, "device_id": self.device_id, "channel": "mc"});
        let count = self.conn.request("recording_get_channel_data_count", channel.clone()).await?["count"]
            .as_u64()
            .ok_or_else(|| OtiiError::Protocol("a sample count that is not a number".into()))?;
        let (mut current, mut t0, mut interval) = (Vec::with_capacity(count as usize), 0.0, 0.0);
        let mut index = 0;
        while index < count {
            let mut ask = channel.clone();
            ask["index"] = json!(index);
            ask["count"] = json!(CHUNK.min(count - index));
            let data = self.conn.request("recording_get_channel_data", ask).await?;
            let values = data["values"].as_array().ok_or_else(|| OtiiError::Protocol(format!("no values: {data}")))?;
            if values.is_empty() {
                return Err(OtiiError::Protocol(format!("no samples from {index} of {count}")));
            }
            if index == 0 {
                t0 = data["timestamp"].as_f64().unwrap_or(0.0);
                interval = data["interval"].as_f64().unwrap_or(0.0);
            }
            current.extend(values.iter().map(|v| v.as_f64().unwrap_or(f64::NAN) as f32));
            index += values.len() as u64;
        }
        if count > 0 && (interval.is_nan() || interval <= 0.0) {
            return Err(OtiiError::Protocol(format!("a sample interval of {interval} s")));
        }
        Ok(PowerTrace {
            rate_hz: if interval > 0.0 { 1.0 / interval } else { 0.0 },
            t0_s: t0,
            current_a: current,
            voltage: Voltage::Constant(self.voltage_v),
            gaps: Vec::new(),
        })
    }

    /// Switches the main output off and returns the licence (always tried, both).
    pub async fn close(mut self) -> Result<(), OtiiError> {
        let off = self.conn.request("arc_set_main", json!({"device_id": self.device_id, "enable": false})).await;
        if let Some(id) = self.licence.take() {
            self.conn.request("otii_return_license", json!({"license_id": id})).await?;
        }
        off.map(|_| ())
    }
}

/// Reserves a free automation licence; `None` when this user holds one already (then it
/// is not this session's to return), unless it is `adopt`, one an earlier session of this
/// lab reserved.
async fn reserve(conn: &mut Connection, adopt: Option<i64>) -> Result<Option<i64>, OtiiError> {
    let licences = conn.request("otii_get_licenses", Value::Null).await?;
    let list = licences["licenses"].as_array().cloned().unwrap_or_default();
    let usable = |l: &&Value| AUTOMATION.contains(&l["type"].as_str().unwrap_or_default()) && l["available"] == true;
    let held: Vec<i64> = list
        .iter()
        .filter(usable)
        .filter(|l| l["reserved_to"].as_str().is_some_and(|r| !r.is_empty()))
        .filter_map(|l| l["id"].as_i64())
        .collect();
    if let Some(id) = adopt.filter(|id| held.contains(id)) {
        return Ok(Some(id));
    }
    if !held.is_empty() {
        return Ok(None);
    }
    let Some(id) = list.iter().filter(usable).find_map(|l| l["id"].as_i64()) else {
        return Err(OtiiError::NoLicence { address: conn.address().to_string() });
    };
    conn.request("otii_reserve_license", json!({"license_id": id})).await?;
    Ok(Some(id))
}

/// Finds the instrument and sets its supply: (its id, its identity, a new project).
async fn set_up(conn: &mut Connection, settings: &SessionSettings) -> Result<(String, Value, i64), OtiiError> {
    let devices = conn.request("otii_get_devices", json!({"timeout": 3})).await?;
    let list: Vec<Value> = devices["devices"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|d| matches!(d["type"].as_str(), Some("Arc" | "Ace")))
        .collect();
    let wanted = settings.device.as_deref();
    let found: Vec<&Value> =
        list.iter().filter(|d| wanted.is_none_or(|w| d["name"] == w || d["device_id"] == w)).collect();
    let device = match found[..] {
        [d] => d.clone(),
        _ => {
            let have: Vec<String> = list
                .iter()
                .map(|d| format!("{} ({})", d["name"].as_str().unwrap_or("?"), d["type"].as_str().unwrap_or("?")))
                .collect();
            return Err(OtiiError::NoDevice {
                address: conn.address().to_string(),
                wanted: match wanted {
                    Some(w) => format!("instrument `{w}`"),
                    None if found.is_empty() => "Arc or Ace".into(),
                    None => "single Arc or Ace (name one with the monitor's `device`)".into(),
                },
                have: if have.is_empty() { "none".into() } else { have.join(", ") },
            });
        }
    };
    let id = device["device_id"].as_str().unwrap_or_default().to_string();
    let dev = |extra: Value| {
        let mut d = json!({"device_id": id});
        if let (Some(d), Some(e)) = (d.as_object_mut(), extra.as_object()) {
            d.extend(e.clone());
        }
        d
    };
    let version = conn.request("arc_get_version", dev(Value::Null)).await?;
    conn.request("arc_set_main_voltage", dev(json!({"value": settings.voltage_v}))).await?;
    conn.request("arc_set_max_current", dev(json!({"value": settings.current_limit_a}))).await?;
    conn.request("arc_enable_channel", dev(json!({"channel": "mc", "enable": true}))).await?;
    // Only an Ace's rate can be set over TCP (the Arc's is 4 kHz): `lab.toml` allows no other.
    if let (Some(rate), Some("Ace")) = (settings.sample_rate_hz, device["type"].as_str()) {
        conn.request("arc_set_channel_samplerate", dev(json!({"channel": "mc", "value": rate}))).await?;
    }
    let project = conn.request("otii_create_project", Value::Null).await?["project_id"]
        .as_i64()
        .ok_or_else(|| OtiiError::Protocol("a project without an id".into()))?;
    let identity = json!({"name": device["name"], "type": device["type"], "device_id": id, "version": version});
    Ok((id, identity, project))
}
