//! `adb shell dumpsys cpuinfo`: CPU load per process over the tracker's last window.
//!
//! ```text
//! Load: 9.02 / 8.77 / 8.54
//! CPU usage from 35123ms to 5120ms ago (2024-01-01 10:00:00.000 to 2024-01-01 10:00:30.000):
//!   12% 1234/com.example: 8.1% user + 4% kernel / faults: 123 minor
//!   0.1% 170/surfaceflinger: 0% user + 0% kernel
//! 5.5% TOTAL: 2.1% user + 3% kernel + 0.1% iowait
//! ```
//! The first percentage of a process line is its total (user + kernel) share of all CPUs.

use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::{end_line, excerpt, finite, number, numbered};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessCpu {
    pub pid: i64,
    pub name: String,
    /// Total CPU %, user + kernel.
    pub total_pct: f64,
    pub user_pct: Option<f64>,
    pub kernel_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuInfo {
    pub processes: Vec<ProcessCpu>,
    /// The `TOTAL:` line's first percentage.
    pub total_pct: Option<f64>,
}

impl CpuInfo {
    pub fn process(&self, pid: i64) -> Option<&ProcessCpu> {
        self.processes.iter().find(|p| p.pid == pid)
    }

    /// Sum over processes named `name` or `name:<sub>` (an app's secondary processes).
    pub fn package_pct(&self, name: &str) -> Option<f64> {
        let hits: Vec<f64> = self
            .processes
            .iter()
            .filter(|p| p.name == name || p.name.strip_prefix(name).is_some_and(|r| r.starts_with(':')))
            .map(|p| p.total_pct)
            .collect();
        (!hits.is_empty()).then(|| hits.iter().sum())
    }
}

/// `8.1% user` → 8.1.
fn pct_of(n: usize, s: &str, what: &str) -> Result<Option<f64>, ParseError> {
    for part in s.split('+') {
        let part = part.trim();
        if let Some(v) = part.strip_suffix(what).map(str::trim).and_then(|v| v.strip_suffix('%')) {
            return finite(n, what, v).map(Some);
        }
    }
    Ok(None)
}

/// Parses `dumpsys cpuinfo` output.
pub fn parse(text: &str) -> Result<CpuInfo, ParseError> {
    let mut processes = Vec::new();
    let mut total_pct = None;
    for (n, raw) in numbered(text) {
        let l = raw.trim();
        let Some((pct, rest)) = l.split_once("% ") else { continue };
        if pct.is_empty() || !pct.chars().all(|c| c.is_ascii_digit() || c == '.' || c == '-') {
            continue;
        }
        let total: f64 = finite(n, "CPU %", pct)?;
        let (who, detail) = rest.split_once(": ").ok_or_else(|| {
            ParseError::at(n, format!("expected `PID/name: …% user + …% kernel`, found `{}`", excerpt(l)))
        })?;
        let detail = detail.split(" / ").next().unwrap_or(detail);
        if who == "TOTAL" {
            total_pct = Some(total);
            continue;
        }
        let (pid, name) = who
            .split_once('/')
            .ok_or_else(|| ParseError::at(n, format!("expected `PID/name` before `:`, found `{}`", excerpt(who))))?;
        processes.push(ProcessCpu {
            pid: number(n, "pid", pid)?,
            name: name.to_string(),
            total_pct: total,
            user_pct: pct_of(n, detail, "user")?,
            kernel_pct: pct_of(n, detail, "kernel")?,
        });
    }
    if processes.is_empty() && total_pct.is_none() {
        return Err(ParseError::at(
            end_line(text),
            "no `N% PID/name: …` line: not `dumpsys cpuinfo` output, or truncated",
        ));
    }
    Ok(CpuInfo { processes, total_pct })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_with_total_and_subprocesses() {
        let t = "Load: 9.02 / 8.77 / 8.54\nCPU usage from 35123ms to 5120ms ago:\n  12% 1234/com.example: 8.1% user + 4% kernel / faults: 123 minor\n  1.5% 1300/com.example:push: 1% user + 0.5% kernel\n5.5% TOTAL: 2.1% user + 3% kernel + 0.1% iowait\n";
        let c = parse(t).unwrap();
        assert_eq!(c.processes.len(), 2);
        assert_eq!(c.process(1234).unwrap().user_pct, Some(8.1));
        assert_eq!(c.package_pct("com.example"), Some(13.5));
        assert_eq!(c.total_pct, Some(5.5));
    }

    #[test]
    fn errors() {
        assert_eq!(parse("  12% com.example\n").unwrap_err().line(), Some(1));
        let r = parse("  12% 1/y: 1% user\n 3% abc: 1% user\n");
        assert_eq!(r.as_ref().err().and_then(|e| e.line()), Some(2), "{r:?}");
        assert_eq!(parse("hello\n").unwrap_err().line(), Some(2));
    }
}
