//! The operator at the terminal of `lab run`: answers the desk's steps as `lab confirm`
//! would from another terminal (both write the answer to the store, and the first one
//! wins). Without a terminal, nothing is prompted and `lab confirm` answers.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::mpsc;

use crate::config::{AttestKey, StoreLocation};
use crate::runner::{Event, now_rfc3339};
use crate::store::Store;

/// A step the terminal is to prompt for.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub id: i64,
    pub device: String,
    pub step: String,
    pub text: String,
    pub attest: Vec<AttestKey>,
}

impl Prompt {
    /// The prompt for a step event the runner waits on; `None` for other events.
    pub fn from_event(e: &Event) -> Option<Prompt> {
        match e {
            Event::OperatorStep { id, device, step, text, attest, confirm: true, .. } => Some(Prompt {
                id: *id,
                device: device.clone(),
                step: step.clone(),
                text: text.clone(),
                attest: attest.iter().filter_map(|k| AttestKey::parse(k)).collect(),
            }),
            _ => None,
        }
    }
}

/// Starts the terminal prompter when standard input is a terminal. The store is opened at
/// the first step: a campaign that asks for one exists by then.
pub fn spawn_terminal(location: StoreLocation) -> Option<mpsc::Sender<Prompt>> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    let (tx, rx) = mpsc::channel::<Prompt>();
    let by = format!("{} (terminal)", std::env::var("USER").unwrap_or_else(|_| "operator".into()));
    std::thread::spawn(move || {
        let mut input = std::io::stdin().lock();
        let mut store: Option<Store> = None;
        for p in rx {
            let Some(values) = ask(&p, &mut input, &mut std::io::stderr()) else { return };
            if store.is_none() {
                match Store::open_at(&location) {
                    Ok(s) => store = Some(s),
                    Err(e) => {
                        eprintln!("    could not record the answer: {e}");
                        continue;
                    }
                }
            }
            let Some(store) = &store else { continue };
            match store.answer_step(p.id, &by, &now_rfc3339(), &values) {
                Ok(true) => {}
                Ok(false) => eprintln!("    (step {} on {} was already answered or expired)", p.step, p.device),
                Err(e) => eprintln!("    could not record the answer: {e}"),
            }
        }
    });
    Some(tx)
}

/// Prompts for one step and reads its answer: Enter to confirm, then each attested value
/// (asked again until it reads). `None` when the input ended.
pub fn ask(
    p: &Prompt,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let mut line = String::new();
    say(out, &format!("\n>>> {}: {} — press Enter when done ", p.device, p.text));
    if input.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut values = serde_json::Map::new();
    for k in &p.attest {
        loop {
            say(out, &format!("    {} (e.g. {}) = ", k.as_str(), k.example()));
            line.clear();
            if input.read_line(&mut line).ok()? == 0 {
                return None;
            }
            match k.value(&line) {
                Ok(v) => {
                    values.insert(k.as_str().into(), serde_json::to_value(v).ok()?);
                    break;
                }
                Err(e) => {
                    say(out, &format!("    {e}\n"));
                }
            }
        }
    }
    Some(values)
}

/// Writes a prompt in one write: stderr is unbuffered, and `write!` would send each piece
/// of the format separately, so the progress bars redrawn on the same terminal could land
/// in the middle of a prompt.
fn say(out: &mut dyn Write, text: &str) {
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_reads_enter_then_each_attested_value_until_it_reads() {
        let p = Prompt {
            id: 1,
            device: "pixel".into(),
            step: "screen".into(),
            text: "Set brightness to 50 %".into(),
            attest: vec![AttestKey::Brightness, AttestKey::Bluetooth],
        };
        let mut input: &[u8] = b"\n150\n50\nOff\n";
        let mut out = Vec::new();
        let values = ask(&p, &mut input, &mut out).expect("answered");
        assert_eq!(serde_json::Value::Object(values), serde_json::json!({ "brightness": 50.0, "bluetooth": false }));
        let shown = String::from_utf8(out).unwrap();
        assert!(shown.contains(">>> pixel: Set brightness to 50 %"), "{shown}");
        assert!(shown.contains("brightness is a percentage from 0 to 100, not `150"), "{shown}");
        let mut ended: &[u8] = b"\n";
        assert_eq!(ask(&p, &mut ended, &mut Vec::new()), None, "input ended before the values");
    }
}
