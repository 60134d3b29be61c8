//! `/proc/<pid>/stat` (proc(5)): CPU time of one process.
//!
//! The command name (field 2) is in parentheses and may itself hold spaces and `)`, so
//! fields are counted after the *last* `)`. `utime` and `stime` (fields 14 and 15) are in
//! clock ticks (`sysconf(_SC_CLK_TCK)`, 100 on Linux and Android).

use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::{excerpt, number, numbered};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcStat {
    pub pid: i64,
    pub comm: String,
    pub state: String,
    pub ppid: Option<i64>,
    /// Process group id.
    pub pgrp: Option<i64>,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// CPU time of the children this process has waited for, in clock ticks.
    pub cutime_ticks: Option<u64>,
    pub cstime_ticks: Option<u64>,
    pub num_threads: Option<i64>,
    /// Time the process started after boot, in clock ticks.
    pub start_time_ticks: Option<u64>,
    /// Resident set size in pages.
    pub rss_pages: Option<i64>,
}

impl ProcStat {
    /// `(utime + stime) / ticks_per_s · 1000`.
    pub fn cpu_ms(&self, ticks_per_s: u64) -> f64 {
        (self.utime_ticks as f64 + self.stime_ticks as f64) * 1000.0 / ticks_per_s.max(1) as f64
    }
}

/// Parses one `/proc/<pid>/stat` line (the first non-empty line of `text`).
pub fn parse(text: &str) -> Result<ProcStat, ParseError> {
    let (n, line) = numbered(text)
        .find(|(_, l)| !l.trim().is_empty())
        .ok_or_else(|| ParseError::at(1, "empty input: expected a /proc/<pid>/stat line"))?;
    let line = line.trim();
    let (open, close) = match (line.find('('), line.rfind(')')) {
        (Some(o), Some(c)) if o < c => (o, c),
        _ => {
            return Err(ParseError::at(n, format!("not a /proc/<pid>/stat line (no `(comm)`): `{}`", excerpt(line))));
        }
    };
    let pid = number::<i64>(n, "pid", &line[..open])?;
    let comm = line[open + 1..close].to_string();
    // After the last `)`: index 0 is field 3 (state), so field k is at index k - 3.
    let rest: Vec<&str> = line[close + 1..].split_whitespace().collect();
    let field = |k: usize, what: &str| -> Result<&str, ParseError> {
        rest.get(k - 3).copied().ok_or_else(|| {
            ParseError::at(
                n,
                format!("the line ends before field {k} ({what}); truncated? it has {} fields", rest.len() + 2),
            )
        })
    };
    let state = field(3, "state")?.to_string();
    let utime_ticks = number(n, "utime (field 14)", field(14, "utime")?)?;
    let stime_ticks = number(n, "stime (field 15)", field(15, "stime")?)?;
    let opt = |k: usize| rest.get(k - 3).and_then(|s| s.parse().ok());
    Ok(ProcStat {
        pid,
        comm,
        state,
        ppid: opt(4),
        pgrp: opt(5),
        utime_ticks,
        stime_ticks,
        cutime_ticks: rest.get(16 - 3).and_then(|s| s.parse().ok()),
        cstime_ticks: rest.get(17 - 3).and_then(|s| s.parse().ok()),
        num_threads: opt(20),
        start_time_ticks: rest.get(22 - 3).and_then(|s| s.parse().ok()),
        rss_pages: opt(24),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_with_spaces_and_parens() {
        let s = "4242 (my (weird) app) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 30 0 0 20 0 12 0 98765 123456789 2500 18446744073709551615\n";
        let p = parse(s).unwrap();
        assert_eq!((p.pid, p.comm.as_str(), p.state.as_str()), (4242, "my (weird) app", "S"));
        assert_eq!((p.utime_ticks, p.stime_ticks, p.num_threads, p.rss_pages), (150, 30, Some(12), Some(2500)));
        assert_eq!(p.cpu_ms(100), 1800.0);
        assert_eq!((p.ppid, p.pgrp, p.cutime_ticks, p.cstime_ticks), (Some(1), Some(4242), Some(0), Some(0)));
    }

    #[test]
    fn truncated_and_garbage() {
        let e = parse("4242 (app) S 1 4242").unwrap_err();
        assert!(e.to_string().contains("field 14"), "{e}");
        assert_eq!(parse("\nhello world\n").unwrap_err().line(), Some(2));
    }
}
