//! Toybox's share of the phone: files (`cat`, `ls`, `rm`, `mkdir`, `sha256sum`, `stat`), text
//! (`echo`, `grep`, `head`, `tail`, `cut`, `wc`), `kill`, `sleep`, `date`. `grep` matches
//! fixed strings only and says so when given a regular expression, rather than match it wrongly.

use std::fmt::Write as _;
use std::fs;

use sha2::{Digest, Sha256};

use crate::commands::Io;
use crate::framework;
use crate::phone::Process;
use crate::store::Store;

pub fn run(store: &Store, name: &str, args: &[String], io: &mut Io) -> Option<i32> {
    let status = match name {
        "true" => 0,
        "false" => 1,
        "echo" => echo(args, io),
        "cat" => cat(store, args, io),
        "rm" => rm(store, args, io),
        "mkdir" => mkdir(store, args, io),
        "sha256sum" => sha256sum(store, args, io),
        "sleep" => sleep(args, io),
        "ls" => ls(store, args, io),
        "date" => date(args, io),
        "kill" => kill(store, args, io),
        "stat" => stat(store, args, io),
        "grep" => grep(store, args, io),
        "head" | "tail" => head_tail(store, name == "head", args, io),
        "cut" => cut(store, args, io),
        "wc" => wc(store, args, io),
        "whoami" => {
            io.say("shell");
            0
        }
        _ => return None,
    };
    Some(status)
}

fn echo(args: &[String], io: &mut Io) -> i32 {
    let (newline, words) = match args.first().map(String::as_str) {
        Some("-n") => (false, &args[1..]),
        _ => (true, args),
    };
    io.out.extend_from_slice(words.join(" ").as_bytes());
    if newline {
        io.out.push(b'\n');
    }
    0
}

/// Reads a file of the phone; /proc/PID/stat comes from the model.
fn read_file(store: &Store, path: &str) -> Option<Vec<u8>> {
    if let Some(pid) = path.strip_prefix("/proc/").and_then(|r| r.strip_suffix("/stat")) {
        let pid: u32 = pid.parse().ok()?;
        return store.update(|p| framework::proc_stat(p, pid)).ok().flatten().map(String::into_bytes);
    }
    if path == "/proc/uptime" {
        let secs = store.update(|p| (p.now_ms - p.boot_ms) as f64 / 1000.0).ok()?;
        return Some(format!("{secs:.2} {:.2}\n", secs * 7.2).into_bytes());
    }
    let host = store.host_path(path);
    if host.is_dir() {
        return None;
    }
    fs::read(host).ok()
}

fn cat(store: &Store, args: &[String], io: &mut Io) -> i32 {
    if args.is_empty() {
        let all = io.stdin_bytes();
        io.out.extend_from_slice(&all);
        return 0;
    }
    let mut status = 0;
    for path in args {
        match read_file(store, path) {
            Some(bytes) => io.out.extend_from_slice(&bytes),
            None => {
                io.warn(format!("cat: {path}: No such file or directory"));
                status = 1;
            }
        }
    }
    status
}

fn rm(store: &Store, args: &[String], io: &mut Io) -> i32 {
    let force = args.iter().any(|a| a.starts_with('-') && a.contains('f'));
    let recursive = args.iter().any(|a| a.starts_with('-') && (a.contains('r') || a.contains('R')));
    let mut status = 0;
    for path in args.iter().filter(|a| !a.starts_with('-')) {
        let host = store.host_path(path);
        let removed = if host.is_dir() {
            if recursive { fs::remove_dir_all(&host).is_ok() } else { false }
        } else {
            fs::remove_file(&host).is_ok()
        };
        let forgiven = force && !host.exists();
        if !removed && !forgiven {
            let why = if host.is_dir() { "Is a directory" } else { "No such file or directory" };
            io.warn(format!("rm: {path}: {why}"));
            status = 1;
        }
    }
    status
}

fn mkdir(store: &Store, args: &[String], io: &mut Io) -> i32 {
    let parents = args.iter().any(|a| a == "-p");
    let mut status = 0;
    for path in args.iter().filter(|a| !a.starts_with('-')) {
        let host = store.host_path(path);
        let made = if parents { fs::create_dir_all(&host) } else { fs::create_dir(&host) };
        if made.is_err() && !(parents && host.is_dir()) {
            io.warn(format!("mkdir: '{path}': File exists"));
            status = 1;
        }
    }
    status
}

fn sha256sum(store: &Store, args: &[String], io: &mut Io) -> i32 {
    let mut status = 0;
    if args.is_empty() {
        let all = io.stdin_bytes();
        io.say(format!("{}  -", hex::encode(Sha256::digest(&all))));
        return 0;
    }
    for path in args {
        match read_file(store, path) {
            Some(bytes) => io.say(format!("{}  {path}", hex::encode(Sha256::digest(&bytes)))),
            None => {
                io.warn(format!("sha256sum: {path}: No such file or directory"));
                status = 1;
            }
        }
    }
    status
}

/// `ls [PATH…]`: names, one a line, sorted (toybox prints columns only on a terminal).
fn ls(store: &Store, args: &[String], io: &mut Io) -> i32 {
    let paths: Vec<&str> = args.iter().filter(|a| !a.starts_with('-')).map(String::as_str).collect();
    let mut status = 0;
    for path in if paths.is_empty() { vec!["/"] } else { paths } {
        let host = store.host_path(path);
        match fs::read_dir(&host) {
            Ok(entries) => {
                let mut names: Vec<String> =
                    entries.flatten().map(|e| e.file_name().to_string_lossy().to_string()).collect();
                names.sort();
                for n in names {
                    io.say(n);
                }
            }
            Err(_) if host.is_file() => io.say(path),
            Err(_) => {
                io.warn(format!("ls: {path}: No such file or directory"));
                status = 1;
            }
        }
    }
    status
}

/// `date [+%s]`: the phone's clock is this machine's, in UTC.
fn date(args: &[String], io: &mut Io) -> i32 {
    let now = crate::store::now_ms();
    let Some(t) = chrono::DateTime::from_timestamp_millis(now as i64) else { return 1 };
    let format = args.first().and_then(|a| a.strip_prefix('+')).unwrap_or("%a %b %e %H:%M:%S UTC %Y");
    let mut text = String::new();
    if write!(text, "{}", t.format(format)).is_err() {
        io.warn(format!("date: bad format '{format}'"));
        return 1;
    }
    io.say(text);
    0
}

fn sleep(args: &[String], io: &mut Io) -> i32 {
    match args.first().and_then(|a| a.parse::<f64>().ok()) {
        Some(s) if s >= 0.0 => {
            std::thread::sleep(std::time::Duration::from_secs_f64(s.min(600.0)));
            0
        }
        _ => {
            io.warn("sleep: need a number of seconds");
            1
        }
    }
}

/// What a signal does to a perfetto session.
#[derive(Clone, Copy, PartialEq)]
enum Signal {
    /// `-0`: only asks whether the process is there.
    Probe,
    /// SIGTERM, SIGINT…: perfetto writes its last packets and exits.
    End,
    /// SIGKILL: it dies at once; the file keeps what was written.
    Kill,
}

/// `kill [-s SIGNAL | -SIGNAL] PID…`: the shell user may signal what it started
/// (perfetto), not apps.
fn kill(store: &Store, args: &[String], io: &mut Io) -> i32 {
    let (signal, pids) = match args {
        [s, sig, rest @ ..] if s == "-s" => (sig.as_str(), rest),
        [sig, rest @ ..] if sig.starts_with('-') => (&sig[1..], rest),
        _ => ("TERM", args),
    };
    let signal = match signal.trim_start_matches("SIG") {
        "0" => Signal::Probe,
        "9" | "KILL" => Signal::Kill,
        _ => Signal::End,
    };
    let pids: Vec<u32> = pids.iter().filter_map(|a| a.parse().ok()).collect();
    if pids.is_empty() {
        io.warn("usage: kill [-s SIGNAL | -SIGNAL] PID...");
        return 1;
    }
    let mut status = 0;
    for pid in pids {
        let outcome = store.update(|p| match p.processes.get(&pid) {
            Some(Process::Perfetto { out, .. }) => {
                let out = out.clone();
                if signal != Signal::Probe {
                    p.processes.remove(&pid);
                }
                if signal == Signal::End {
                    store.finish_trace(&out, p);
                }
                Ok(())
            }
            Some(Process::App { .. }) => Err("Operation not permitted"),
            None => Err("No such process"),
        });
        let why = match outcome {
            Ok(Ok(())) => continue,
            Ok(Err(why)) => why.to_string(),
            Err(e) => e.to_string(),
        };
        io.warn(format!("/system/bin/sh: kill: {pid}: {why}"));
        status = 1;
    }
    status
}

/// `stat -c FORMAT FILE…` with `%s` (size in bytes) and `%n` (the name).
fn stat(store: &Store, args: &[String], io: &mut Io) -> i32 {
    let (format, files) = match args {
        [c, format, files @ ..] if c == "-c" && !files.is_empty() => (format, files),
        _ => {
            io.warn("usage: stat -c FORMAT FILE... (the stand-in knows %s and %n)");
            return 1;
        }
    };
    let mut status = 0;
    for path in files {
        match fs::metadata(store.host_path(path)) {
            Ok(m) => io.say(format.replace("%s", &m.len().to_string()).replace("%n", path)),
            Err(_) => {
                io.warn(format!("stat: '{path}': No such file or directory"));
                status = 1;
            }
        }
    }
    status
}

/// The text of FILE, or of stdin when there is none.
fn input(store: &Store, file: Option<&String>, io: &mut Io) -> Option<String> {
    let bytes = match file {
        Some(path) => read_file(store, path)?,
        None => io.stdin_bytes(),
    };
    Some(String::from_utf8_lossy(&bytes).to_string())
}

fn missing(io: &mut Io, tool: &str, path: Option<&String>) -> i32 {
    io.warn(format!("{tool}: {}: No such file or directory", path.map_or("-", String::as_str)));
    1
}

/// `grep [-v] [-i] [-c] [-F] [-e] PATTERN [FILE]`.
fn grep(store: &Store, args: &[String], io: &mut Io) -> i32 {
    let (mut invert, mut nocase, mut count) = (false, false, false);
    let mut operands = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-e" => operands.extend(it.next()),
            "-F" => {}
            o if o.starts_with('-') && o.len() > 1 && operands.is_empty() => {
                invert |= o.contains('v');
                nocase |= o.contains('i');
                count |= o.contains('c');
            }
            _ => operands.push(a),
        }
    }
    let Some(pattern) = operands.first() else {
        io.warn("usage: grep [-civF] PATTERN [FILE]");
        return 2;
    };
    if pattern.contains(['*', '[', '^', '$', '\\', '?', '+', '(', '|', '{']) {
        io.warn(format!("grep: the stand-in matches fixed strings only, not '{pattern}'"));
        return 2;
    }
    let Some(text) = input(store, operands.get(1).copied(), io) else {
        return missing(io, "grep", operands.get(1).copied());
    };
    let fold = |s: &str| if nocase { s.to_lowercase() } else { s.to_string() };
    let needle = fold(pattern);
    let hits: Vec<&str> = text.lines().filter(|l| fold(l).contains(&needle) != invert).collect();
    if count {
        io.say(hits.len().to_string());
    } else {
        for l in &hits {
            io.say(l);
        }
    }
    if hits.is_empty() { 1 } else { 0 }
}

/// `head|tail [-n N] [FILE]`.
fn head_tail(store: &Store, head: bool, args: &[String], io: &mut Io) -> i32 {
    let mut n = 10usize;
    let mut file = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-n" => n = it.next().and_then(|v| v.parse().ok()).unwrap_or(10),
            o if o.starts_with('-') && o[1..].parse::<usize>().is_ok() => n = o[1..].parse().unwrap(),
            _ => file = Some(a),
        }
    }
    let tool = if head { "head" } else { "tail" };
    let Some(text) = input(store, file, io) else { return missing(io, tool, file) };
    let lines: Vec<&str> = text.lines().collect();
    let picked = if head { &lines[..n.min(lines.len())] } else { &lines[lines.len().saturating_sub(n)..] };
    for l in picked {
        io.say(l);
    }
    0
}

/// `cut -d C -f N[,M…] [FILE]`.
fn cut(store: &Store, args: &[String], io: &mut Io) -> i32 {
    let (mut delim, mut fields, mut file) = ("\t".to_string(), Vec::new(), None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = (a.get(..2).unwrap_or(""), a.get(2..).unwrap_or(""));
        let value = |it: &mut std::slice::Iter<String>| {
            if inline.is_empty() { it.next().cloned().unwrap_or_default() } else { inline.to_string() }
        };
        match flag {
            "-d" => delim = value(&mut it),
            "-f" => fields = value(&mut it).split(',').filter_map(|f| f.parse::<usize>().ok()).collect(),
            _ => file = Some(a),
        }
    }
    if fields.is_empty() || delim.chars().count() != 1 {
        io.warn("cut: usage: cut -d C -f N[,M...] [FILE]");
        return 1;
    }
    let Some(text) = input(store, file, io) else { return missing(io, "cut", file) };
    for line in text.lines() {
        let parts: Vec<&str> = line.split(delim.as_str()).collect();
        if parts.len() == 1 {
            io.say(line); // a line without the delimiter is printed whole
            continue;
        }
        let picked: Vec<&str> = fields.iter().filter_map(|f| parts.get(f.wrapping_sub(1)).copied()).collect();
        io.say(picked.join(&delim));
    }
    0
}

/// `wc -l|-c [FILE]`.
fn wc(store: &Store, args: &[String], io: &mut Io) -> i32 {
    let file = args.iter().find(|a| !a.starts_with('-'));
    let Some(text) = input(store, file, io) else { return missing(io, "wc", file) };
    let n = if args.iter().any(|a| a == "-c") { text.len() } else { text.matches('\n').count() };
    io.say(n.to_string());
    0
}
