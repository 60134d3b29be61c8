//! The JSON event stream of `lab run --message-format json`: one object per line, each
//! with the stream's version, its place in the stream and the wall-clock time it was
//! written. The fields are documented in docs/report.md.

use std::io::Write;

use serde_json::{Map, Value};

use crate::runner::{EVENT_STREAM_VERSION, Event};

/// Writes the stream's lines, each flushed at once: a CI log or a dashboard follows the
/// campaign live, and a kill loses no line already reported.
pub struct EventLines {
    out: Box<dyn Write + Send>,
    seq: u64,
}

impl EventLines {
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        EventLines { out, seq: 0 }
    }

    /// A runner event, as its line.
    pub fn event(&mut self, e: &Event) {
        match serde_json::to_string(e) {
            Ok(json) => self.line(&json),
            Err(err) => self.write(Map::from_iter([
                ("event".into(), "unserializable".into()),
                ("detail".into(), err.to_string().into()),
            ])),
        }
    }

    /// A line that is not a runner event (`report_written`, `comparison`), from its
    /// fields; `event` is put first, as in the runner's.
    pub fn write(&mut self, mut fields: Map<String, Value>) {
        let event = fields.remove("event").unwrap_or_else(|| "unnamed".into());
        let rest = serde_json::to_string(&Value::Object(fields)).unwrap_or_else(|_| "{}".into());
        let sep = if rest == "{}" { "" } else { "," };
        self.line(&format!("{{\"event\":{event}{sep}{}", &rest[1..]));
    }

    /// `object` (`{"event":…}`, fields in their declared order) with the stream's
    /// fields put first, so every line starts `{"v":1,"seq":…,"time":…,"event":…`.
    fn line(&mut self, object: &str) {
        let Some(rest) = object.strip_prefix('{').filter(|r| r.len() > 1) else { return };
        let time = crate::runner::now_rfc3339();
        let text = format!("{{\"v\":{EVENT_STREAM_VERSION},\"seq\":{},\"time\":\"{time}\",{rest}", self.seq);
        self.seq += 1;
        // A reader that went away (`| head`) ends the stream, not the campaign.
        let _ = writeln!(self.out, "{text}").and_then(|()| self.out.flush());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_is_one_versioned_object_in_sequence() {
        let buf = Shared::default();
        let mut lines = EventLines::new(Box::new(buf.clone()));
        lines.event(&Event::DeviceDone { device: "sim-1".into() });
        lines.event(&Event::CampaignFinished {
            id: "c".into(),
            status: crate::store::CampaignStatus::Done,
            valid: 3,
            failed: 0,
            pending: 0,
            invalid_attempts: 1,
            wall: std::time::Duration::from_millis(1500),
            note: None,
        });
        lines.write(Map::from_iter([("event".into(), "report_written".into()), ("campaign".into(), "c".into())]));
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let parsed: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(parsed.len(), 3);
        for (i, v) in parsed.iter().enumerate() {
            assert_eq!((v["v"].as_u64(), v["seq"].as_u64()), (Some(EVENT_STREAM_VERSION.into()), Some(i as u64)));
            assert!(v["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{v}");
        }
        assert_eq!((parsed[0]["event"].as_str(), parsed[0]["device"].as_str()), (Some("device_done"), Some("sim-1")));
        assert_eq!(parsed[1]["event"], "campaign_finished");
        assert_eq!((parsed[1]["status"].as_str(), parsed[1]["wall_s"].as_f64()), (Some("done"), Some(1.5)));
        assert_eq!(parsed[2]["event"], "report_written");
        assert!(text.lines().all(|l| l.starts_with(&format!("{{\"v\":{EVENT_STREAM_VERSION},\"seq\":"))), "{text}");
        assert!(text.lines().next().unwrap().contains("\",\"event\":\"device_done\",\"device\":\"sim-1\"}"), "{text}");
        assert!(text.lines().nth(2).unwrap().contains("\",\"event\":\"report_written\",\"campaign\":\"c\"}"), "{text}");
    }
}
