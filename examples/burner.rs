//! `burner`: a calibrated CPU load, to check the host backend's CPU figure.
//!
//! ```text
//! burner [--share 0.5] [--slice 5ms]
//! ```
//!
//! Keeps its own CPU time at `share` of the wall time since it started: it spins while
//! its CPU time (CLOCK_PROCESS_CPUTIME_ID, the kernel's accounting) is behind
//! `share × elapsed`, and sleeps while it is ahead, in slices of about `--slice`. Its
//! share is therefore known to within a slice, whatever else the machine runs (as long
//! as it can get `share` of a core). Runs until killed.

use std::process::ExitCode;
use std::time::{Duration, Instant};

fn process_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn parse_args() -> Result<(f64, Duration), String> {
    let (mut share, mut slice) = (0.5, Duration::from_millis(5));
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        match a.as_str() {
            "--share" => share = v.parse().map_err(|_| format!("--share {v}: not a number"))?,
            "--slice" => {
                let ms = v.strip_suffix("ms").and_then(|n| n.parse::<u64>().ok());
                slice = Duration::from_millis(ms.ok_or_else(|| format!("--slice {v}: write milliseconds, e.g. 5ms"))?);
            }
            _ => return Err(format!("unknown argument `{a}`; usage: burner [--share 0.5] [--slice 5ms]")),
        }
    }
    if !(share > 0.0 && share <= 1.0) {
        return Err(format!("--share {share}: must be in (0, 1]"));
    }
    Ok((share, slice))
}

fn main() -> ExitCode {
    let (share, slice) = match parse_args() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("burner: {e}");
            return ExitCode::from(2);
        }
    };
    let (t0, c0) = (Instant::now(), process_cpu());
    let mut x = 0u64;
    loop {
        let target = t0.elapsed().mul_f64(share);
        let used = process_cpu() - c0;
        if used < target {
            // Behind: spin for one slice of CPU.
            let until = used + slice;
            while process_cpu() - c0 < until {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        } else {
            // Ahead: sleep until `share × elapsed` catches up with the CPU used.
            std::thread::sleep((used - target).div_f64(share));
        }
    }
}
