//! A measuring session on one Otii instrument: an automation licence reserved first and
//! returned at the end (`close`), the supply set, the main current recorded around the
//! soak with markers at its start and end, and the samples read back as a `PowerTrace`.
//!
//! Markers sit on the instrument's clock, not on this machine's: a recording starts once
//! the instrument says it is sampling, each marker is put where the instrument says its
//! samples end at that moment (`recording_get_channel_info`'s `to`), and the time between
//! two markers is checked against this machine's clock, so an instrument that stopped
//! sampling or lost samples between them is caught (docs/platforms/monitors.md, "Otii:
//! windows on the instrument's clock").

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Connection, OtiiError};
use crate::collect::monitor::{Gap, PowerTrace, Voltage};

/// The licence types that allow automation (as Qoitech's client maps them).
const AUTOMATION: &[&str] = &["Automation", "All", "Admin", "Enterprise"];
/// Samples a read asks for (Qoitech's client asks 40 000 at a time).
const CHUNK: u64 = 40_000;
/// How often a starting recording is asked whether it has samples yet.
const POLL: Duration = Duration::from_millis(10);
/// How far the instrument's and this machine's clocks may disagree over the time between
/// two markers, beyond the markers' round trips: the longest gap a window allows (10 ms,
/// `GapLimits`), plus 100 ppm for two crystals' drift.
const CLOCK_SLACK_S: f64 = 0.010;
const CLOCK_DRIFT: f64 = 1e-4;

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
    timeout: Duration,
    /// The running recording and its markers.
    recording: Option<(i64, Vec<Mark>)>,
}

/// A marker as placed: on this machine's clock (the middle of the round trip that asked
/// the instrument's time), on the instrument's, and how long that round trip took.
#[derive(Debug, Clone, Copy)]
struct Mark {
    here: Instant,
    at_s: f64,
    round_trip: Duration,
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
                timeout: settings.timeout,
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

    /// Starts a recording with the main output on, and returns once the instrument has
    /// samples in it: a server that answers before it samples (one on a busy lab host)
    /// would otherwise have the soak begin before its recording does.
    pub async fn start(&mut self) -> Result<(), OtiiError> {
        self.conn.request("arc_set_main", json!({"device_id": self.device_id, "enable": true})).await?;
        self.conn.request("project_start_recording", json!({"project_id": self.project})).await?;
        let last = self.conn.request("project_get_last_recording", json!({"project_id": self.project})).await?;
        let id = last["recording_id"].as_i64().filter(|&id| id >= 0);
        let id = id.ok_or_else(|| OtiiError::Protocol(format!("no recording after it started: {last}")))?;
        self.recording = Some((id, Vec::new()));
        let asked = Instant::now();
        while self.now_on_instrument(id).await?.0 <= 0.0 {
            if asked.elapsed() >= self.timeout {
                return Err(OtiiError::NotSampling {
                    address: self.conn.address().to_string(),
                    seconds: self.timeout.as_secs_f64(),
                });
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    /// Where recording `id`'s samples end now, on the instrument's clock (seconds), and
    /// the round trip that asked.
    async fn now_on_instrument(&mut self, id: i64) -> Result<(f64, Instant, Duration), OtiiError> {
        let sent = Instant::now();
        let info = self
            .conn
            .request(
                "recording_get_channel_info",
                json!({"recording_id": id, "device_id": self.device_id, "channel": "mc"}),
            )
            .await?;
        let round_trip = sent.elapsed();
        let to = info["to"].as_f64().filter(|t| t.is_finite());
        let to =
            to.ok_or_else(|| OtiiError::Protocol(format!("a recording's channel info without its end: {info}")))?;
        Ok((to, sent + round_trip / 2, round_trip))
    }

    /// The licence this session reserved (and will return), if it did.
    pub fn licence(&self) -> Option<i64> {
        self.licence
    }

    /// Puts a marker `text` in the recording, now: where the instrument says its samples
    /// end; that time, on the recording's clock.
    pub async fn mark(&mut self, text: &str) -> Result<f64, OtiiError> {
        let id = self.recording.as_ref().map(|r| r.0);
        let id = id.ok_or_else(|| OtiiError::Protocol("a marker with no recording".into()))?;
        let (at_s, here, round_trip) = self.now_on_instrument(id).await?;
        self.conn.request("recording_log", json!({"recording_id": id, "text": text, "timestamp": at_s})).await?;
        if let Some((_, marks)) = self.recording.as_mut() {
            marks.push(Mark { here, at_s, round_trip });
        }
        Ok(at_s)
    }

    /// Stops the recording (main output off) and reads its main current back.
    pub async fn stop(&mut self) -> Result<PowerTrace, OtiiError> {
        let (id, marks) = self.recording.take().ok_or_else(|| OtiiError::Protocol("no recording to stop".into()))?;
        self.conn.request("project_stop_recording", json!({"project_id": self.project})).await?;
        self.conn.request("arc_set_main", json!({"device_id": self.device_id, "enable": false})).await?;
        let channel = json!({"recording_id": id, "device_id": self.device_id, "channel": "mc"});
        let count = self.conn.request("recording_get_channel_data_count", channel.clone()).await?["count"]
            .as_u64()
            .ok_or_else(|| OtiiError::Protocol("a sample count that is not a number".into()))?;
        let mut samples = Samples::with_capacity(count as usize);
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
            samples.chunk(data["timestamp"].as_f64(), data["interval"].as_f64(), values)?;
            index += values.len() as u64;
        }
        let mut trace = samples.trace(Voltage::Constant(self.voltage_v));
        trace.unaligned = clock_disagreement(&marks);
        Ok(trace)
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

/// Why the instrument's clock cannot be trusted between two of a recording's markers: it
/// advanced less (samples stopped or were lost) or more than this machine's, beyond what
/// the round trips that placed them and the clocks' drift allow.
fn clock_disagreement(marks: &[Mark]) -> Option<String> {
    marks.windows(2).find_map(|m| {
        let here = m[1].here.duration_since(m[0].here).as_secs_f64();
        let there = m[1].at_s - m[0].at_s;
        let slack = CLOCK_SLACK_S + (m[0].round_trip + m[1].round_trip).as_secs_f64() + CLOCK_DRIFT * here;
        ((there - here).abs() > slack).then(|| {
            format!(
                "the Otii's recording advanced {there:.3} s between markers {:.3} s and {:.3} s where this machine's clock advanced {here:.3} s (it stopped sampling or lost samples)",
                m[0].at_s, m[1].at_s
            )
        })
    })
}

/// A recording's samples as they are read, chunk by chunk: a `null` or non-finite value is
/// a missing sample, and so is a chunk that begins later than the samples before it end.
struct Samples {
    current: Vec<f32>,
    gaps: Vec<Gap>,
    t0_s: f64,
    interval: f64,
    /// Samples accounted for (kept or missing) since the first.
    slots: u64,
}

impl Samples {
    fn with_capacity(n: usize) -> Samples {
        Samples { current: Vec::with_capacity(n), gaps: Vec::new(), t0_s: 0.0, interval: 0.0, slots: 0 }
    }

    fn chunk(&mut self, timestamp: Option<f64>, interval: Option<f64>, values: &[Value]) -> Result<(), OtiiError> {
        let interval = interval.filter(|i| i.is_finite() && *i > 0.0);
        let interval = interval.ok_or_else(|| OtiiError::Protocol(format!("a sample interval of {interval:?} s")))?;
        let timestamp = timestamp.filter(|t| t.is_finite());
        let timestamp = timestamp.ok_or_else(|| OtiiError::Protocol("a chunk of samples without its time".into()))?;
        if self.slots == 0 {
            (self.t0_s, self.interval) = (timestamp, interval);
        } else if (interval - self.interval).abs() > self.interval * 1e-9 {
            return Err(OtiiError::Protocol(format!(
                "the sample interval changed from {} s to {interval} s",
                self.interval
            )));
        } else {
            // Where this chunk's first sample is, in sample slots from the first: a chunk
            // that starts later than the last one ended left samples out.
            let slot = ((timestamp - self.t0_s) / self.interval).round();
            if slot < self.slots as f64 {
                return Err(OtiiError::Protocol(format!(
                    "a chunk of samples at {timestamp} s overlaps the one before"
                )));
            }
            self.missing(slot as u64 - self.slots);
        }
        for v in values {
            match v.as_f64().filter(|a| a.is_finite()) {
                Some(amps) => {
                    self.current.push(amps as f32);
                    self.slots += 1;
                }
                None => self.missing(1),
            }
        }
        Ok(())
    }

    /// `n` samples missing before the next one kept.
    fn missing(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        self.slots += n;
        let at = self.current.len();
        match self.gaps.last_mut() {
            Some(g) if g.at == at => g.missing += n,
            _ => self.gaps.push(Gap { at, missing: n }),
        }
    }

    fn trace(self, voltage: Voltage) -> PowerTrace {
        PowerTrace {
            rate_hz: if self.interval > 0.0 { 1.0 / self.interval } else { 0.0 },
            t0_s: self.t0_s,
            current_a: self.current,
            voltage,
            gaps: self.gaps,
            unaligned: None,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nulls_and_a_chunk_that_starts_late_are_gaps_and_no_sample_is_a_nan() {
        let mut s = Samples::with_capacity(8);
        s.chunk(Some(1.0), Some(0.25), &[json!(0.1), Value::Null, Value::Null, json!(0.2)]).unwrap();
        // Resumes two slots after the first chunk ended (at 2.0 s): 2 missing.
        s.chunk(Some(2.5), Some(0.25), &[json!(0.3), json!("x")]).unwrap();
        let t = s.trace(Voltage::Constant(3.0));
        assert_eq!(t.current_a, vec![0.1, 0.2, 0.3]);
        assert_eq!(t.gaps, vec![Gap { at: 1, missing: 2 }, Gap { at: 2, missing: 2 }, Gap { at: 3, missing: 1 }]);
        assert_eq!((t.t0_s, t.rate_hz), (1.0, 4.0));
        let times: Vec<f64> = t.times().collect();
        assert_eq!(times, vec![1.0, 1.75, 2.5], "each kept sample at its own time");
    }

    #[test]
    fn chunks_that_overlap_or_change_their_interval_are_refused() {
        let mut s = Samples::with_capacity(4);
        s.chunk(Some(0.0), Some(0.5), &[json!(0.1), json!(0.1)]).unwrap();
        assert!(s.chunk(Some(0.5), Some(0.5), &[json!(0.1)]).unwrap_err().to_string().contains("overlaps"));
        assert!(s.chunk(Some(1.0), Some(0.25), &[json!(0.1)]).unwrap_err().to_string().contains("interval changed"));
        assert!(s.chunk(Some(1.0), None, &[json!(0.1)]).is_err());
    }

    #[test]
    fn an_instrument_clock_that_ran_slow_between_markers_is_reported_beyond_the_slack() {
        let here = Instant::now();
        let rt = Duration::from_micros(500);
        let mark = |after: f64, at_s: f64| Mark { here: here + Duration::from_secs_f64(after), at_s, round_trip: rt };
        // 8 s here, 8.005 s there: within 10 ms + the round trips.
        assert_eq!(clock_disagreement(&[mark(0.0, 0.5), mark(8.0, 8.505)]), None);
        // Sampling stopped 3 s before the end marker.
        let why = clock_disagreement(&[mark(0.0, 0.5), mark(8.0, 5.5)]).unwrap();
        assert!(why.starts_with("the Otii's recording advanced 5.000 s between markers 0.500 s and 5.500 s"), "{why}");
        assert!(why.contains("this machine's clock advanced 8.000 s"), "{why}");
    }
}
