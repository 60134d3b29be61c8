//! A measuring session on one Monsoon, shaped as the Otii's (`monitor::otii::Session`) so
//! the runner treats both alike: `open` (identity and calibration read, current limit,
//! voltage and USB passthrough set), `start` (sampling on a thread of its own, returning
//! once the instrument has calibrated), `mark` (now, on the monitor's clock), `stop` (the
//! samples as a `PowerTrace`), `close` (output off). `set_passthrough` switches the
//! device's USB data and charging through the monitor off and on (`tether = "monitor"`).
//!
//! Every USB call blocks, so each runs on tokio's blocking pool (`spawn_blocking`) and
//! the bulk reads on a thread of their own: no runtime thread waits on USB.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::decode::{Decoded, Decoder};
use super::protocol::{self, op};
use super::{Calibration, MonsoonError, NusbLink, UsbError, UsbLink};
use crate::collect::monitor::{PowerTrace, Voltage};
use crate::config::MonsoonModel;

/// Measurement samples a second, fixed on both models.
pub const RATE_HZ: f64 = 5000.0;
/// How long a bulk read waits before the reader looks whether it should stop.
const READ_TIMEOUT: Duration = Duration::from_millis(100);

/// USB passthrough: whether the device's USB (data and charging) goes through the
/// monitor. `Auto`: on, except while sampling (the API's default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passthrough {
    Off = 0,
    On = 1,
    Auto = 2,
}

/// What a session sets on its instrument.
#[derive(Debug, Clone)]
pub struct MonsoonSettings {
    pub model: MonsoonModel,
    pub voltage_v: f64,
    /// Both the power-up and the run-time limit.
    pub current_limit_a: f64,
    pub passthrough: Passthrough,
    /// How long `start` waits for the instrument's first calibration.
    pub calibration_timeout: Duration,
}

impl MonsoonSettings {
    pub fn new(model: MonsoonModel, voltage_v: f64, current_limit_a: f64) -> MonsoonSettings {
        MonsoonSettings {
            model,
            voltage_v,
            current_limit_a,
            passthrough: Passthrough::Auto,
            calibration_timeout: Duration::from_secs(5),
        }
    }
}

/// What the reader thread shares while it runs.
#[derive(Default)]
struct Progress {
    position: AtomicU64,
    calibrated: AtomicBool,
    failure: Mutex<Option<UsbError>>,
}

/// The reader thread's result: the link back, the samples, and why it ended early.
struct Ended {
    link: Box<dyn UsbLink>,
    decoded: Decoded,
    failure: Option<UsbError>,
}

struct Sampling {
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
    reader: Option<JoinHandle<Ended>>,
}

impl Drop for Sampling {
    /// A session dropped while sampling lets its reader end.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

pub struct Monsoon {
    /// `None` while the reader thread holds it, or after a USB call that never returned.
    link: Option<Box<dyn UsbLink>>,
    /// The serial it was opened by, for messages.
    serial: String,
    /// The instrument: model, serial, versions, calibration, for the manifest.
    pub identity: Value,
    calibration: Calibration,
    calibration_timeout: Duration,
    sampling: Option<Sampling>,
    markers: Vec<(String, f64)>,
}

impl Monsoon {
    /// Opens the Monsoon with USB serial number `serial` on this machine.
    pub async fn open_usb(serial: &str, settings: &MonsoonSettings) -> Result<Monsoon, MonsoonError> {
        let wanted = serial.to_string();
        let link = tokio::task::spawn_blocking(move || NusbLink::open(&wanted))
            .await
            .map_err(|e| state(serial, &format!("opening it panicked: {e}")))??;
        Monsoon::open(Box::new(link), serial, settings).await
    }

    /// Sets up the Monsoon behind `link` (`serial` names it in messages): reads its
    /// identity and calibration, then sets the current limit, the voltage and passthrough.
    pub async fn open(
        link: Box<dyn UsbLink>,
        serial: &str,
        settings: &MonsoonSettings,
    ) -> Result<Monsoon, MonsoonError> {
        let (who, settings_) = (serial.to_string(), settings.clone());
        let (link, result) = blocking(link, move |l| set_up(l, &who, &settings_)).await;
        let (identity, calibration) = result?;
        Ok(Monsoon {
            link: Some(link),
            serial: serial.to_string(),
            identity,
            calibration,
            calibration_timeout: settings.calibration_timeout,
            sampling: None,
            markers: Vec::new(),
        })
    }

    /// Switches USB passthrough on or off. The instrument takes no command while it
    /// samples, so this is for before `start` or after `stop`.
    pub async fn set_passthrough(&mut self, on: bool) -> Result<(), MonsoonError> {
        if self.sampling.is_some() {
            return Err(self.state(
                "USB passthrough cannot be switched while sampling (the Monsoon refuses commands then): switch it before `start` or after `stop`",
            ));
        }
        let mode = if on { Passthrough::On } else { Passthrough::Off } as u32;
        self.call("switching USB passthrough", move |l| protocol::set(l, op::USB_PASSTHROUGH, mode)).await
    }

    /// Starts sampling; returns once the instrument has sent its first calibration, so
    /// samples are being decoded from then on.
    pub async fn start(&mut self) -> Result<(), MonsoonError> {
        if self.sampling.is_some() {
            return Err(self.state("`start` while sampling"));
        }
        self.markers.clear();
        self.call("starting to sample", |l| {
            // Packets left from an earlier run would be read as this one's.
            for _ in 0..10_000 {
                if l.bulk_in(Duration::from_millis(10))?.is_none() {
                    break;
                }
            }
            protocol::start(l, protocol::CAL_TIME_MS, protocol::SAMPLE_FOREVER)
        })
        .await?;
        let link = self.link.take().ok_or_else(|| self.state("its USB link was lost by an earlier call"))?;
        let (stop, progress) = (Arc::new(AtomicBool::new(false)), Arc::new(Progress::default()));
        let (stop_, progress_, calibration) = (stop.clone(), progress.clone(), self.calibration.clone());
        let reader = std::thread::Builder::new()
            .name(format!("monsoon {}", self.serial))
            .spawn(move || read(link, Decoder::new(calibration), &stop_, &progress_))
            .map_err(|e| self.state(&format!("cannot start its reader thread: {e}")))?;
        self.sampling = Some(Sampling { stop, progress: progress.clone(), reader: Some(reader) });
        let deadline = Instant::now() + self.calibration_timeout;
        while !progress.calibrated.load(Ordering::Acquire) {
            let failed = progress.failure.lock().unwrap_or_else(|e| e.into_inner()).is_some();
            if failed || Instant::now() >= deadline {
                let ended = self.stop_reading().await;
                if let Some(error) = self.lost(&ended) {
                    return Err(error);
                }
                let _ = self.call("stopping after no calibration", protocol::stop).await;
                return Err(MonsoonError::NoCalibration {
                    serial: self.serial.clone(),
                    seconds: self.calibration_timeout.as_secs_f64(),
                });
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    /// Marks now, `text`: its time on the monitor's clock (the measurement samples taken
    /// since `start`, dropped ones included, / 5 kHz), the clock the trace's times are on.
    pub async fn mark(&mut self, text: &str) -> Result<f64, MonsoonError> {
        let Some(sampling) = &self.sampling else { return Err(self.state("a marker with nothing sampling")) };
        if let Some(why) = sampling.progress.failure.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            let after_s = sampling.progress.position.load(Ordering::Acquire) as f64 / RATE_HZ;
            return Err(MonsoonError::Lost { serial: self.serial.clone(), after_s, why });
        }
        let at = sampling.progress.position.load(Ordering::Acquire) as f64 / RATE_HZ;
        self.markers.push((text.to_string(), at));
        Ok(at)
    }

    /// The markers of the current or last run, in order.
    pub fn markers(&self) -> &[(String, f64)] {
        &self.markers
    }

    /// Stops sampling and returns the main channel's samples.
    pub async fn stop(&mut self) -> Result<PowerTrace, MonsoonError> {
        if self.sampling.is_none() {
            return Err(self.state("no sampling to stop"));
        }
        let ended = self.stop_reading().await;
        if let Some(error) = self.lost(&ended) {
            return Err(error);
        }
        self.call("stopping sampling", protocol::stop).await?;
        let Some((decoded, _)) = ended else { return Err(self.state("its reader thread panicked")) };
        Ok(trace(decoded))
    }

    /// Stops sampling if it runs and switches the output off (both always tried). If the
    /// instrument has left USB its output cannot be switched off from here: the error
    /// says so.
    pub async fn close(mut self) -> Result<(), MonsoonError> {
        let was_sampling = self.sampling.is_some();
        if was_sampling {
            let _ = self.stop_reading().await;
        }
        self.call("switching its output off at the end (it may still be on: switch the Monsoon off)", move |l| {
            let stopped = if was_sampling { protocol::stop(l) } else { Ok(()) };
            protocol::set(l, op::MAIN_VOLTAGE, 0).and(stopped)
        })
        .await
    }

    /// Ends the reader thread: the link back, and what it decoded and why it ended
    /// (`None` if it panicked).
    async fn stop_reading(&mut self) -> Option<(Decoded, Option<UsbError>)> {
        let mut sampling = self.sampling.take()?;
        sampling.stop.store(true, Ordering::Relaxed);
        let reader = sampling.reader.take()?;
        let ended = tokio::task::spawn_blocking(move || reader.join()).await.ok()?.ok()?;
        self.link = Some(ended.link);
        Some((ended.decoded, ended.failure))
    }

    /// The error for a reader that ended on a USB failure.
    fn lost(&self, ended: &Option<(Decoded, Option<UsbError>)>) -> Option<MonsoonError> {
        let (decoded, failure) = ended.as_ref()?;
        let why = failure.clone()?;
        let after = decoded.t0_position + decoded.main_ma.len() as u64;
        Some(MonsoonError::Lost { serial: self.serial.clone(), after_s: after as f64 / RATE_HZ, why })
    }

    /// Runs `f` on the link on the blocking pool.
    async fn call<T: Send + 'static>(
        &mut self,
        doing: &str,
        f: impl FnOnce(&mut dyn UsbLink) -> Result<T, UsbError> + Send + 'static,
    ) -> Result<T, MonsoonError> {
        let link = self.link.take().ok_or_else(|| self.state("its USB link was lost by an earlier call"))?;
        let (link, result) = blocking(link, f).await;
        self.link = Some(link);
        result.map_err(|why| MonsoonError::Usb { serial: self.serial.clone(), doing: doing.to_string(), why })
    }

    fn state(&self, what: &str) -> MonsoonError {
        state(&self.serial, what)
    }
}

fn state(serial: &str, what: &str) -> MonsoonError {
    MonsoonError::State { serial: serial.to_string(), what: what.to_string() }
}

/// `f(link)` on tokio's blocking pool; the link comes back with the result.
async fn blocking<T: Send + 'static, E: Send + 'static>(
    mut link: Box<dyn UsbLink>,
    f: impl FnOnce(&mut dyn UsbLink) -> Result<T, E> + Send + 'static,
) -> (Box<dyn UsbLink>, Result<T, E>) {
    let task = tokio::task::spawn_blocking(move || {
        let result = f(link.as_mut());
        (link, result)
    });
    // Only a panic in `f` fails the join; it is a bug, and resumes here as one.
    match task.await {
        Ok(done) => done,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Reads identity and calibration and sets the supply (pmapi.py `Connect`, HVPM.py and
/// LVPM.py `fillStatusPacket`, `setVout`, the current limits, `setUSBPassthroughMode`).
fn set_up(
    link: &mut dyn UsbLink,
    serial: &str,
    settings: &MonsoonSettings,
) -> Result<(Value, Calibration), MonsoonError> {
    let usb = |doing: &str| {
        let (serial, doing) = (serial.to_string(), doing.to_string());
        move |why| MonsoonError::Usb { serial: serial.clone(), doing: doing.clone(), why }
    };
    let get = |l: &mut dyn UsbLink, opcode, len| protocol::get(l, opcode, len, false);
    let model = get(link, op::HARDWARE_MODEL, 2).map_err(usb("reading its model"))?;
    let (expected, name) = match settings.model {
        MonsoonModel::Hvpm => (protocol::MODEL_HVPM, "HVPM"),
        MonsoonModel::Lvpm => (protocol::MODEL_LVPM, "LVPM"),
    };
    if model != expected {
        let (found, fix) = match model {
            protocol::MODEL_HVPM => ("HVPM".to_string(), "hvpm"),
            protocol::MODEL_LVPM => ("LVPM".to_string(), "lvpm"),
            other => (format!("unknown model ({other})"), "hvpm"),
        };
        return Err(MonsoonError::WrongModel { serial: serial.into(), expected: name.into(), found, fix: fix.into() });
    }
    let reading = usb("reading its identity");
    let firmware = get(link, op::FIRMWARE_VERSION, 2).map_err(&reading)?;
    let protocol_version = get(link, op::PROTOCOL_VERSION, 1).map_err(&reading)?;
    let eeprom_serial = get(link, op::SERIAL_NUMBER, 2).map_err(&reading)?;
    // A run that ended without stopping leaves it sampling, and deaf to commands.
    if firmware >= 26 && get(link, op::START_STATUS, 1).map_err(&reading)? & i64::from(protocol::SAMPLING_BIT) != 0 {
        protocol::stop(link).map_err(usb("stopping the sampling an earlier run left on"))?;
    }
    let calibration = Calibration::read(link, settings.model).map_err(usb("reading its calibration"))?;
    let limit = match settings.model {
        MonsoonModel::Hvpm => {
            let low = get(link, op::DAC_CAL_LOW, 2).map_err(&reading)?;
            let high = get(link, op::DAC_CAL_HIGH, 2).map_err(&reading)?;
            if low <= 0xD000 || low >= 0xF000 || high <= 0xC000 || high >= 0xD000 {
                return Err(MonsoonError::DacCalibration { serial: serial.into(), low, high });
            }
            protocol::hvpm_limit_raw(settings.current_limit_a)
        }
        MonsoonModel::Lvpm => protocol::lvpm_limit_raw(settings.current_limit_a),
    };
    let setting = usb("setting its supply");
    protocol::set(link, op::POWERUP_CURRENT_LIMIT, limit).map_err(&setting)?;
    protocol::set(link, op::RUN_CURRENT_LIMIT, limit).map_err(&setting)?;
    protocol::set(link, op::MAIN_VOLTAGE, protocol::voltage_raw(settings.voltage_v)).map_err(&setting)?;
    protocol::set(link, op::USB_PASSTHROUGH, settings.passthrough as u32).map_err(&setting)?;
    let identity = json!({
        "kind": "monsoon",
        "model": name,
        "usb_serial": serial,
        "serial": eeprom_serial,
        "firmware": firmware,
        "protocol": protocol_version,
        "calibration": calibration.to_json(),
    });
    Ok((identity, calibration))
}

/// The reader thread: bulk packets into the decoder until told to stop or USB fails.
fn read(mut link: Box<dyn UsbLink>, mut decoder: Decoder, stop: &AtomicBool, progress: &Progress) -> Ended {
    let mut failure = None;
    while !stop.load(Ordering::Relaxed) {
        match link.bulk_in(READ_TIMEOUT) {
            Ok(Some(packet)) => {
                decoder.push(&packet);
                progress.position.store(decoder.position(), Ordering::Release);
                if decoder.calibrated() {
                    progress.calibrated.store(true, Ordering::Release);
                }
            }
            Ok(None) | Err(UsbError::Timeout) => {}
            Err(e) => {
                *progress.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.clone());
                failure = Some(e);
                break;
            }
        }
    }
    Ended { link, decoded: decoder.finish(), failure }
}

/// The decoded samples as lab's trace: amperes, volts, the gaps, on the monitor's clock.
fn trace(decoded: Decoded) -> PowerTrace {
    PowerTrace {
        rate_hz: RATE_HZ,
        t0_s: decoded.t0_position as f64 / RATE_HZ,
        current_a: decoded.main_ma.iter().map(|ma| (ma / 1000.0) as f32).collect(),
        voltage: Voltage::Sampled(decoded.main_v.iter().map(|&v| v as f32).collect()),
        gaps: decoded.gaps,
        unaligned: None,
    }
}
