//! `adb shell dumpsys meminfo <package>`: TOTAL PSS and RSS of each of the app's processes.
//!
//! ```text
//! ** MEMINFO in pid 21936 [com.android.launcher3] **
//!                    Pss      Pss   Shared  Private   Shared  Private     Swap      Rss     Heap ...
//!                  Total    Clean    Dirty    Dirty    Clean    Clean    Dirty    Total     Size ...
//!                 ------   ------   ------   ------   ------   ------   ------   ------   ------
//!   Native Heap    24482        0     2692    24380        0        0        0    27072    39580 ...
//!         TOTAL    48291 ...
//! ```
//! The two header rows name the columns (`Pss Total`, `Rss Total`); their order differs by
//! Android version (older versions have no RSS column), so columns are found by name. All
//! values are in KB. The `App Summary` lines `TOTAL PSS:` / `TOTAL RSS:` are used when the
//! table has no TOTAL row.

use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::{end_line, excerpt, number, numbered};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessMemory {
    pub pid: i64,
    pub process: String,
    pub total_pss_kb: u64,
    pub total_rss_kb: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemInfo {
    pub processes: Vec<ProcessMemory>,
}

impl MemInfo {
    pub fn total_pss_kb(&self) -> u64 {
        self.processes.iter().fold(0u64, |a, p| a.saturating_add(p.total_pss_kb))
    }

    pub fn total_rss_kb(&self) -> Option<u64> {
        self.processes.iter().try_fold(0u64, |a, p| p.total_rss_kb.map(|r| a.saturating_add(r)))
    }
}

struct Open {
    line: usize,
    pid: i64,
    process: String,
    columns: Vec<String>,
    header_rows: Vec<Vec<String>>,
    pss: Option<u64>,
    rss: Option<u64>,
}

impl Open {
    fn finish(self) -> Result<ProcessMemory, ParseError> {
        let pss = self.pss.ok_or_else(|| {
            ParseError::at(self.line, format!("process {} ({}) has no TOTAL row (truncated?)", self.pid, self.process))
        })?;
        Ok(ProcessMemory { pid: self.pid, process: self.process, total_pss_kb: pss, total_rss_kb: self.rss })
    }
}

/// `** MEMINFO in pid 123 [com.example] **` → (123, "com.example").
fn process_header(n: usize, l: &str) -> Result<(i64, String), ParseError> {
    let inner = l.trim_start_matches('*').trim_end_matches('*').trim();
    let rest = inner.strip_prefix("MEMINFO in pid ").ok_or_else(|| ParseError::at(n, "malformed MEMINFO header"))?;
    let (pid, name) = rest.split_once(' ').ok_or_else(|| ParseError::at(n, "MEMINFO header without a process name"))?;
    let name = name.trim().trim_start_matches('[').trim_end_matches(']');
    Ok((number(n, "pid", pid)?, name.to_string()))
}

/// Parses `dumpsys meminfo <package>` output.
pub fn parse(text: &str) -> Result<MemInfo, ParseError> {
    let mut processes = Vec::new();
    let mut open: Option<Open> = None;
    for (n, raw) in numbered(text) {
        let l = raw.trim();
        if l.starts_with("No process found for:") {
            return Err(ParseError::at(n, format!("dumpsys found no such process: `{}`", excerpt(l))));
        }
        if l.starts_with("** MEMINFO in pid") {
            if let Some(p) = open.take() {
                processes.push(p.finish()?);
            }
            let (pid, process) = process_header(n, l)?;
            open = Some(Open {
                line: n,
                pid,
                process,
                columns: Vec::new(),
                header_rows: Vec::new(),
                pss: None,
                rss: None,
            });
            continue;
        }
        let Some(p) = open.as_mut() else { continue };
        let tokens: Vec<&str> = l.split_whitespace().collect();
        if p.columns.is_empty() {
            // Header rows come first; the dashes row closes them.
            if tokens.first().is_some_and(|t| t.starts_with("---")) {
                let (top, bottom) = match p.header_rows.as_slice() {
                    [top, bottom] => (top, bottom),
                    _ => return Err(ParseError::at(n, "the column header is not two rows")),
                };
                if top.len() != bottom.len() {
                    return Err(ParseError::at(n, "the two column header rows have different widths"));
                }
                p.columns = top.iter().zip(bottom).map(|(a, b)| format!("{a} {b}")).collect();
            } else if !tokens.is_empty() && p.header_rows.len() < 2 {
                p.header_rows.push(tokens.iter().map(|s| s.to_string()).collect());
            }
            continue;
        }
        if tokens.first() == Some(&"TOTAL") && p.pss.is_none() {
            let values = &tokens[1..];
            let col = |name: &str| p.columns.iter().position(|c| c == name);
            let get = |i: usize, what: &str| -> Result<u64, ParseError> {
                let v = values.get(i).ok_or_else(|| ParseError::at(n, format!("TOTAL row has no {what} value")))?;
                number(n, what, v)
            };
            let pss_col = col("Pss Total").ok_or_else(|| ParseError::at(n, "the table has no `Pss Total` column"))?;
            p.pss = Some(get(pss_col, "Pss Total")?);
            if let Some(i) = col("Rss Total") {
                p.rss = Some(get(i, "Rss Total")?);
            }
        } else if let Some(rest) = l.strip_prefix("TOTAL PSS:") {
            // App Summary: `TOTAL PSS:  48291  TOTAL RSS:  98765  TOTAL SWAP PSS:  0`.
            let mut it = rest.split_whitespace();
            if p.pss.is_none() {
                p.pss = Some(number(n, "TOTAL PSS", it.next().unwrap_or(""))?);
            }
            if p.rss.is_none()
                && let Some(i) = l.find("TOTAL RSS:")
            {
                let v = l[i + "TOTAL RSS:".len()..].split_whitespace().next().unwrap_or("");
                p.rss = Some(number(n, "TOTAL RSS", v)?);
            }
        }
    }
    if let Some(p) = open.take() {
        processes.push(p.finish()?);
    }
    if processes.is_empty() {
        return Err(ParseError::at(
            end_line(text),
            "no `** MEMINFO in pid … **` section: not `dumpsys meminfo <package>` output, or truncated",
        ));
    }
    Ok(MemInfo { processes })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: &str = "Applications Memory Usage (in Kilobytes):\nUptime: 277172845 Realtime: 423847246\n\n** MEMINFO in pid 21936 [com.android.launcher3] **\n                   Pss      Pss   Shared  Private   Shared  Private     Swap      Rss     Heap     Heap     Heap\n                 Total    Clean    Dirty    Dirty    Clean    Clean    Dirty    Total     Size    Alloc     Free\n                ------   ------   ------   ------   ------   ------   ------   ------   ------   ------   ------\n  Native Heap    24482        0     2692    24380        0        0        0    27072    39580    24489    11037\n        TOTAL    48291     1200     9000    40000      500      300        0    98765    68231    28564    15000\n\n App Summary\n               TOTAL PSS:    48291       TOTAL RSS:    98765      TOTAL SWAP PSS:        0\n";
    const OLD: &str = "** MEMINFO in pid 1234 [com.example] **\n                   Pss  Private  Private  SwapPss     Heap     Heap     Heap\n                 Total    Dirty    Clean    Dirty     Size    Alloc     Free\n                ------   ------   ------   ------   ------   ------   ------\n  Native Heap    10468    10408        0        0    20480    14462     6017\n        TOTAL    30123    25000     2000        0    47620    35617    12002\n";

    #[test]
    fn columns_by_name_in_both_layouts() {
        let m = parse(NEW).unwrap();
        assert_eq!(m.processes[0].process, "com.android.launcher3");
        assert_eq!((m.total_pss_kb(), m.total_rss_kb()), (48291, Some(98765)));
        let m = parse(OLD).unwrap();
        assert_eq!((m.processes[0].pid, m.total_pss_kb(), m.total_rss_kb()), (1234, 30123, None));
    }

    #[test]
    fn errors() {
        assert_eq!(parse("No process found for: com.x\n").unwrap_err().line(), Some(1));
        let cut: String = NEW.lines().take(8).collect::<Vec<_>>().join("\n");
        let e = parse(&cut).unwrap_err();
        assert_eq!(e.line(), Some(4), "{e}");
        assert_eq!(parse("garbage\n").unwrap_err().line(), Some(2));
    }
}
