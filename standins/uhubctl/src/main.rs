//! `uhubctl`: a stand-in for uhubctl 2.x (github.com/mvp/uhubctl) for tests, with USB hubs
//! described in a JSON file instead of libusb. Put it on PATH as `uhubctl` (a symlink to
//! target/…/uhubctl): it takes uhubctl's options, prints what uhubctl.c prints for
//! the described hubs — `Current status for hub`, `Sent power on|off request`, `New status
//! for hub` — with the same words, errors and exit codes, and switches the described ports.
//! Only the hub hardware is stood in for.
//!
//! ```text
//! uhubctl [-l LOC] [-p PORTS] [-a off|on|cycle|toggle|flash|0..4] [-r N] [-w MS] [-d SEC]
//!         [-e] [-f] [-N] [-R] [-S] [-L LEVEL] [-n VID] [-s TEXT] [-H TEXT] [-v] [-h]
//! uhubctl --standin-plug LOC PORT none|VID:PID [VENDOR [PRODUCT [SERIAL]]]
//! uhubctl --standin-vbus LOC PORT
//! uhubctl --standin-bus LOC PORT
//! ```
//!
//! Environment:
//! - `UHUBCTL_STATE` (required): the JSON file of the hubs, read and written under an
//!   exclusive `flock` on `UHUBCTL_STATE.lock`, written whole and renamed into place.
//! - `UHUBCTL_LOG`: each uhubctl invocation appends one line, its arguments joined by
//!   spaces, then — when `SSH_CONNECTION` is set, as in an sshd session — a tab and
//!   `SSH_CONNECTION=<its value>`. `--standin-*` calls are not logged.
//! - `UHUBCTL_TIME_SCALE`: uhubctl's sleeps (the `-d` delay of a cycle, 2 s by default; `-w`
//!   between repeated offs; 150 ms after switching a USB3 hub off) are multiplied by this,
//!   0.01 by default (a cycle's 2 s takes 20 ms). `1` sleeps as uhubctl does.
//!
//! The state file (unknown keys are refused; defaults in brackets):
//!
//! ```json
//! { "hubs": [
//!   { "location": "1-1", "id": "2109:2813", "vendor": "VIA Labs, Inc.", "product": "USB2.0 Hub",
//!     "serial": "", "usb": "2.10", "switching": "ppps", "twin": "2-1",
//!     "ports": [
//!       { "powered": true,
//!         "device": { "id": "18d1:4ee7", "vendor": "Google", "product": "Pixel 7",
//!                     "serial": "2A111FDH200B4Z", "speed": "high",
//!                     "on_vbus": ["adb-phone", "power", "/tmp/phone"], "on_bus": [] } },
//!       { "powered": false, "vbus_stays": true },
//!       { "off_needs_repeat": 10 },
//!       {} ] },
//!   { "location": "2-1", "id": "2109:0813", "vendor": "VIA Labs, Inc.", "product": "USB3.0 Hub",
//!     "usb": "3.00", "switching": "ppps", "ports": [{}, {}, {}, {}] } ] }
//! ```
//!
//! - A hub: `location` as uhubctl prints it (bus, then the port path); `id` vid:pid;
//!   `vendor`, `product`, `serial` its string descriptors [""]; `usb` its bcdUSB — from
//!   `3.00` on it is a super speed hub (uhubctl's rule); `switching` `ppps`, `ganged` or `nops`;
//!   `twin` [none] the other half of a USB2+USB3 hub (named from either side), switched with it
//!   unless `-e`; `ports` 1 to 15 of them, port 1 first. A hub whose location is below
//!   a described hub's port (`1-1.3` under `1-1` port 3) is on the bus only while that port is
//!   powered, and is what that port shows as connected.
//! - A port: `powered` [true]; `device` [none] what is plugged in (`speed` `low`, `full` or
//!   [`high`]; on a super speed hub it runs at 5 Gbps); `vbus_stays` [false]: switched off it
//!   drops the device from the bus but keeps VBUS, so the device still charges;
//!   `off_needs_repeat` [1]: the kernel powers the port again (Linux < 6.0) unless one
//!   invocation sends at least this many off requests (`-r N`).
//! - A device's hooks: `on_vbus` is run with `usb` or `none` appended when the VBUS at it
//!   changes, `on_bus` with `attached` or `detached` when it joins or leaves the bus, after the
//!   state is written and before uhubctl prints the New status (a hook must not run the
//!   stand-in: the state is locked).
//!
//! What follows from the state, as on real hardware:
//! - VBUS at a port: its hub has power from above (through either twin), and the port, or the
//!   same port of the twin, is powered, or it keeps VBUS (`--standin-vbus LOC PORT` prints it;
//!   `--standin-bus LOC PORT` whether the device plugged in there is on the bus).
//!   So `-e` on one half of a USB3 hub leaves the device charging, as uhubctl's README says.
//! - wPortStatus: USB2 `0000 off`, `0100 power`, a device `0103` full speed, `0503` high
//!   speed, `0303` low speed (`power [highspeed|lowspeed] enable connect [DESC]`); USB3
//!   `00a0 off`, `02a0 power 5gbps Rx.Detect`, `0203 power 5gbps U0 enable connect [DESC]`.
//!   Devices are described from what was on the bus when the run started (libusb's list), so
//!   a port powered during the run shows `0101 power connect []` in the New status, as
//!   uhubctl prints it on real hubs (USB3: `02e1 … Polling connect []`, a guess); a device
//!   that left and came back in the same run (`-a cycle`) shows only its vid:pid,
//!   `0101 power connect [18d1:4ee7]` (its old libusb entry no longer opens; read from
//!   uhubctl.c, not seen on a hub).
//! - Switching: a `ganged` hub switches all its ports when any is switched; a `nops` hub
//!   changes nothing; both are listed and acted on only with `-f` (a one-port ganged hub
//!   counts as `ppps`, as in uhubctl). Listing without `-l` shows every per-port hub; acting
//!   on more than one physical hub at once is refused as uhubctl refuses it.
//!
//! Not modelled: `-y` (refused), sysfs vs libusb (`-S` is accepted and changes nothing),
//! permission errors, over-current, suspend, the hub reset of `-R` (only its messages).

mod control;
mod describe;
mod enumerated;
mod hooks;
mod live;
mod options;
mod session;
mod state;
mod store;

use std::io::Write;
use std::process::ExitCode;

use live::Live;

/// The line a run appends to UHUBCTL_LOG.
fn log_line(args: &[String], ssh: Option<&str>) -> String {
    let mut line = args.join(" ");
    if let Some(ssh) = ssh {
        line += &format!("\tSSH_CONNECTION={ssh}");
    }
    line + "\n"
}

fn log_call(args: &[String]) {
    let Some(path) = std::env::var_os("UHUBCTL_LOG") else { return };
    let line = log_line(args, std::env::var("SSH_CONNECTION").ok().as_deref());
    // One write on an O_APPEND file: parallel runs' lines do not interleave.
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("UHUBCTL_LOG opens");
    f.write_all(line.as_bytes()).expect("UHUBCTL_LOG is written");
}

fn exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let prog = argv.first().map(String::as_str).unwrap_or("uhubctl");
    let args = &argv[1.min(argv.len())..];
    if args.first().is_some_and(|a| a.starts_with("--standin-")) {
        return exit(control::main(args));
    }
    log_call(args);
    let o = match options::parse(prog, args) {
        Ok(o) => o,
        Err(early) => {
            print!("{}", early.stdout);
            eprint!("{}", early.stderr);
            return exit(early.code);
        }
    };
    let (mut live, mut state) = match Live::open() {
        Ok(opened) => opened,
        Err(e) => {
            eprintln!("{e}");
            return exit(1);
        }
    };
    let code = session::run(&o, &mut state, &mut live, &mut std::io::stdout().lock(), &mut std::io::stderr());
    match code {
        Ok(code) => exit(code),
        Err(e) => {
            eprintln!("uhubctl stand-in: {e}");
            exit(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_line_is_the_arguments_and_the_ssh_session() {
        let args: Vec<String> = ["-l", "1-1", "-p", "2", "-a", "off"].map(String::from).to_vec();
        assert_eq!(log_line(&args, None), "-l 1-1 -p 2 -a off\n");
        assert_eq!(
            log_line(&args, Some("127.0.0.1 50000 127.0.0.1 22")),
            "-l 1-1 -p 2 -a off\tSSH_CONNECTION=127.0.0.1 50000 127.0.0.1 22\n"
        );
        assert_eq!(log_line(&[], None), "\n", "a bare listing is an empty line");
    }
}
