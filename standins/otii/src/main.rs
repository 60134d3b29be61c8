//! `otii --port N [--state FILE] [--device-name NAME] [--base-ma X] [--pulse-ma Y]
//! [--pulse-every-s P] [--pulse-width-s W] [--hang-up-after-s S] [--others-hold N]
//! [--type Arc|Ace] [faults, below]`: the Otii 3 TCP server's protocol (CRLF-delimited JSON, `trans_id` echoed as sent, a greeting on connect, error replies with
//! the `errorcode`s Qoitech's clients read) in front of one simulated Arc. The device it
//! supplies draws `base` mA, plus `pulse` mA for `width` s at the start of every `every` s
//! of a recording, so a window's energy is known in closed form. The main current is
//! sampled at 4 kHz, generated from the recording's own clock when asked for. Licences
//! are the logged-in user's, as on Otii 3: a connection that ends keeps them reserved.
//! `--hang-up-after-s S` shuts every open connection down S s after the first recording
//! starts (a lost connection; the server goes on). `--others-hold N`: N of its two
//! licences are reserved to another user. `--type Ace`: the instrument is an Ace, whose
//! main current's sample rate can be set (`arc_set_channel_samplerate`) and whose output
//! goes to 25 V.
//!
//! An instrument that misbehaves, on each recording's own clock (seconds from its first
//! sample): `--late-start-s D` starts sampling D s after `project_start_recording` is
//! answered (a server on a busy lab host); `--null-s A:B` sends the samples of [A, B) as
//! `null`; `--drop-s A:B` never delivers them (the next chunk's `timestamp` says where the
//! samples resume); `--sample-for-s T` stops sampling T s in. `--ramp-ma-per-s R` adds
//! R mA per second since the recording started to the draw, so that a window in the
//! wrong place gives the wrong energy (the pulses alone repeat every second).
//!
//! `--state FILE` gets, after every request, the licences reserved, the recordings with
//! their markers (`recording_log`: the time the client gave; when the server got it,
//! `received_s` after the recording started; and `placed_s`, when the server told that
//! time, where it is a channel info's `to`), the supply settings and every command
//! received, as JSON: what the tests check. `--port 0` picks a free port; the first line on stdout is
//! `listening on 127.0.0.1:PORT`.

mod server;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match server::Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("otii: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = server::serve(config) {
        eprintln!("otii: {e}");
        std::process::exit(1);
    }
}
