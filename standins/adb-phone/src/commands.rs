//! The command interpreter: the little of /system/bin/sh (mksh) that hosts send — `;`,
//! `&&`, `||`, `|`, quotes, `$?`, `$(…)`, `>`, `>>`, `<`, `2>&1`, `sh -c`, `exit`. The
//! commands are in `toolbox.rs` (files and text), `framework.rs` and `packages.rs`.
//! An unknown command answers as mksh does: "inaccessible or not found", status 127.

use std::fs;
use std::io::{Read, Write};

use crate::store::Store;
use crate::{framework, packages, toolbox};

/// One command's standard streams. Output is collected: every command here is quick.
pub struct Io<'a> {
    pub stdin: &'a mut dyn Read,
    pub out: Vec<u8>,
    pub err: Vec<u8>,
}

impl Io<'_> {
    pub fn say(&mut self, line: impl AsRef<str>) {
        self.out.extend_from_slice(line.as_ref().as_bytes());
        self.out.push(b'\n');
    }

    pub fn warn(&mut self, line: impl AsRef<str>) {
        self.err.extend_from_slice(line.as_ref().as_bytes());
        self.err.push(b'\n');
    }

    pub fn stdin_bytes(&mut self) -> Vec<u8> {
        let mut all = Vec::new();
        let _ = self.stdin.read_to_end(&mut all);
        all
    }
}

/// A test's fault: when `ROOT/crash-on` holds text that `script` contains, the phone drops
/// off in the middle of that command (the file is removed first, so it happens once): the
/// stand-in exits and every connection breaks, as when a phone reboots or its cable is pulled.
fn crash_if_asked(store: &Store, script: &str) {
    let flag = store.root().join("crash-on");
    if let Ok(what) = std::fs::read_to_string(&flag)
        && !what.trim().is_empty()
        && script.contains(what.trim())
        && std::fs::remove_file(&flag).is_ok()
    {
        eprintln!("crashing on `{}` as asked", what.trim());
        std::process::exit(137);
    }
}

/// Runs `script` as `sh -c` would; returns its exit status.
pub fn run(store: &Store, script: &str, io: &mut Io) -> i32 {
    crash_if_asked(store, script);
    let mut sh = Shell { store, status: 0, exited: false };
    sh.script(script, io)
}

struct Shell<'a> {
    store: &'a Store,
    status: i32,
    exited: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text { text: String, quoted: bool },
    Status,
    Subst { script: String, quoted: bool },
}

type Word = Vec<Part>;

#[derive(Debug, Clone, PartialEq)]
enum Target {
    File(Word),
    Fd(u32),
}

#[derive(Debug, Clone, PartialEq)]
struct Redir {
    fd: u32,
    append: bool,
    input: bool,
    target: Target,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(Word),
    Redir(Redir),
    /// `;`, `&` or a newline: run in sequence (nothing runs in the background here).
    Seq,
    And,
    Or,
    Pipe,
}

#[derive(Debug, Default)]
struct Simple {
    words: Vec<Word>,
    redirs: Vec<Redir>,
}

fn syntax(msg: &str) -> String {
    format!("/system/bin/sh: syntax error: {msg}")
}

fn lex(src: &str) -> Result<Vec<Token>, String> {
    let c: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut tokens = Vec::new();
    while i < c.len() {
        match c[i] {
            ' ' | '\t' => i += 1,
            '#' => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            ';' | '\n' => {
                tokens.push(Token::Seq);
                i += 1;
            }
            '&' if c.get(i + 1) == Some(&'&') => {
                tokens.push(Token::And);
                i += 2;
            }
            '&' => {
                tokens.push(Token::Seq);
                i += 1;
            }
            '|' if c.get(i + 1) == Some(&'|') => {
                tokens.push(Token::Or);
                i += 2;
            }
            '|' => {
                tokens.push(Token::Pipe);
                i += 1;
            }
            d if d.is_ascii_digit() && matches!(c.get(i + 1), Some('>' | '<')) => {
                let fd = d.to_digit(10).unwrap();
                i += 1;
                tokens.push(Token::Redir(redirection(&c, &mut i, fd)?));
            }
            '>' | '<' => {
                let fd = if c[i] == '<' { 0 } else { 1 };
                tokens.push(Token::Redir(redirection(&c, &mut i, fd)?));
            }
            _ => tokens.push(Token::Word(word(&c, &mut i)?)),
        }
    }
    Ok(tokens)
}

fn redirection(c: &[char], i: &mut usize, fd: u32) -> Result<Redir, String> {
    let input = c[*i] == '<';
    *i += 1;
    let append = !input && c.get(*i) == Some(&'>');
    if append {
        *i += 1;
    }
    if c.get(*i) == Some(&'&') {
        *i += 1;
        let d = c.get(*i).and_then(|d| d.to_digit(10)).ok_or_else(|| syntax("bad fd after >&"))?;
        *i += 1;
        return Ok(Redir { fd, append, input, target: Target::Fd(d) });
    }
    while matches!(c.get(*i), Some(' ' | '\t')) {
        *i += 1;
    }
    if *i >= c.len() || ";&|<>\n".contains(c[*i]) {
        return Err(syntax("missing file after redirection"));
    }
    Ok(Redir { fd, append, input, target: Target::File(word(c, i)?) })
}

/// Reads `$(…)` from just after `$(`; returns the inner script.
fn subst(c: &[char], i: &mut usize) -> Result<String, String> {
    let start = *i;
    let mut depth = 1;
    while *i < c.len() {
        match c[*i] {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    let inner: String = c[start..*i].iter().collect();
                    *i += 1;
                    return Ok(inner);
                }
            }
            '\'' => {
                *i += 1;
                while *i < c.len() && c[*i] != '\'' {
                    *i += 1;
                }
            }
            '\\' => *i += 1,
            _ => {}
        }
        *i += 1;
    }
    Err(syntax("unclosed $("))
}

fn word(c: &[char], i: &mut usize) -> Result<Word, String> {
    let mut parts = Vec::new();
    let mut text = String::new();
    let flush = |text: &mut String, parts: &mut Word, quoted: bool| {
        if !text.is_empty() {
            parts.push(Part::Text { text: std::mem::take(text), quoted });
        }
    };
    while *i < c.len() {
        let ch = c[*i];
        if " \t\n;&|<>".contains(ch) {
            break;
        }
        *i += 1;
        match ch {
            '\'' => {
                flush(&mut text, &mut parts, false);
                let start = *i;
                while *i < c.len() && c[*i] != '\'' {
                    *i += 1;
                }
                if *i == c.len() {
                    return Err(syntax("unclosed '"));
                }
                // An empty '' is still a word.
                parts.push(Part::Text { text: c[start..*i].iter().collect(), quoted: true });
                *i += 1;
            }
            '"' => {
                flush(&mut text, &mut parts, false);
                let mut q = String::new();
                let mut closed = false;
                while *i < c.len() {
                    let d = c[*i];
                    *i += 1;
                    match d {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\\' if *i < c.len() && "$`\"\\\n".contains(c[*i]) => {
                            q.push(c[*i]);
                            *i += 1;
                        }
                        '$' if c.get(*i) == Some(&'?') => {
                            *i += 1;
                            parts.push(Part::Text { text: std::mem::take(&mut q), quoted: true });
                            parts.push(Part::Status);
                        }
                        '$' if c.get(*i) == Some(&'(') => {
                            *i += 1;
                            parts.push(Part::Text { text: std::mem::take(&mut q), quoted: true });
                            parts.push(Part::Subst { script: subst(c, i)?, quoted: true });
                        }
                        _ => q.push(d),
                    }
                }
                if !closed {
                    return Err(syntax("unclosed \""));
                }
                parts.push(Part::Text { text: q, quoted: true });
            }
            '\\' if *i < c.len() => {
                text.push(c[*i]);
                *i += 1;
            }
            '$' if c.get(*i) == Some(&'?') => {
                *i += 1;
                flush(&mut text, &mut parts, false);
                parts.push(Part::Status);
            }
            '$' if c.get(*i) == Some(&'(') => {
                *i += 1;
                flush(&mut text, &mut parts, false);
                parts.push(Part::Subst { script: subst(c, i)?, quoted: false });
            }
            _ => text.push(ch),
        }
    }
    flush(&mut text, &mut parts, false);
    Ok(parts)
}

impl Shell<'_> {
    fn script(&mut self, src: &str, io: &mut Io) -> i32 {
        let tokens = match lex(src) {
            Ok(t) => t,
            Err(msg) => {
                io.warn(msg);
                return 2;
            }
        };
        // Split into pipelines joined by ;, && and ||.
        let mut pipeline: Vec<Simple> = vec![Simple::default()];
        let mut pending = Token::Seq;
        let mut tokens = tokens.into_iter().peekable();
        while !self.exited {
            let token = tokens.next();
            match token {
                Some(Token::Word(w)) => pipeline.last_mut().unwrap().words.push(w),
                Some(Token::Redir(r)) => pipeline.last_mut().unwrap().redirs.push(r),
                Some(Token::Pipe) => pipeline.push(Simple::default()),
                sep => {
                    let cmds = std::mem::replace(&mut pipeline, vec![Simple::default()]);
                    let empty = cmds.iter().all(|s| s.words.is_empty() && s.redirs.is_empty());
                    let runs = match pending {
                        Token::And => self.status == 0,
                        Token::Or => self.status != 0,
                        _ => true,
                    };
                    if !empty && runs {
                        self.status = self.pipeline(cmds, io);
                    }
                    match sep {
                        None => break,
                        Some(s) => pending = s,
                    }
                }
            }
        }
        self.status
    }

    fn expand(&mut self, word: &Word, io: &mut Io) -> Vec<String> {
        let mut fields = vec![String::new()];
        let mut any_quoted = false;
        for part in word {
            match part {
                Part::Text { text, quoted } => {
                    any_quoted |= *quoted;
                    fields.last_mut().unwrap().push_str(text);
                }
                Part::Status => fields.last_mut().unwrap().push_str(&self.status.to_string()),
                Part::Subst { script, quoted } => {
                    let mut sub = Io { stdin: &mut std::io::empty(), out: Vec::new(), err: Vec::new() };
                    let mut inner = Shell { store: self.store, status: self.status, exited: false };
                    self.status = inner.script(script, &mut sub);
                    io.err.extend_from_slice(&sub.err);
                    let text = String::from_utf8_lossy(&sub.out).trim_end_matches('\n').to_string();
                    if *quoted {
                        any_quoted = true;
                        fields.last_mut().unwrap().push_str(&text);
                    } else {
                        let mut split = text.split_whitespace();
                        if let Some(first) = split.next() {
                            fields.last_mut().unwrap().push_str(first);
                        }
                        fields.extend(split.map(str::to_string));
                    }
                }
            }
        }
        if fields.len() == 1 && fields[0].is_empty() && !any_quoted {
            return Vec::new();
        }
        fields
    }

    fn pipeline(&mut self, cmds: Vec<Simple>, io: &mut Io) -> i32 {
        let last = cmds.len() - 1;
        let mut input: Option<Vec<u8>> = None;
        let mut status = 0;
        for (n, cmd) in cmds.into_iter().enumerate() {
            let mut argv = Vec::new();
            for w in &cmd.words {
                argv.extend(self.expand(w, io));
            }
            let mut file_in: Option<Vec<u8>> = None;
            for r in cmd.redirs.iter().filter(|r| r.input) {
                if let Target::File(w) = &r.target {
                    let path = self.expand(w, io).join(" ");
                    match fs::read(self.store.host_path(&path)) {
                        Ok(bytes) => file_in = Some(bytes),
                        Err(_) => {
                            io.warn(format!("/system/bin/sh: can't open {path}: No such file or directory"));
                            return 1;
                        }
                    }
                }
            }
            let mut stdin_bytes;
            let stdin: &mut dyn Read = match (file_in, input.take()) {
                (Some(bytes), _) | (None, Some(bytes)) => {
                    stdin_bytes = std::io::Cursor::new(bytes);
                    &mut stdin_bytes
                }
                (None, None) => &mut *io.stdin,
            };
            let mut sub = Io { stdin, out: Vec::new(), err: Vec::new() };
            status = if argv.is_empty() { 0 } else { self.command(&argv, &mut sub) };
            let (mut out, mut err) = (sub.out, sub.err);
            for r in cmd.redirs.iter().filter(|r| !r.input) {
                let data = match r.fd {
                    1 => std::mem::take(&mut out),
                    2 => std::mem::take(&mut err),
                    _ => continue,
                };
                match &r.target {
                    Target::Fd(1) => out.extend_from_slice(&data),
                    Target::Fd(_) => err.extend_from_slice(&data),
                    Target::File(w) => {
                        let path = self.expand(w, io).join(" ");
                        if path != "/dev/null" && !self.write_file(&path, &data, r.append) {
                            io.warn(format!("/system/bin/sh: can't create {path}: No such file or directory"));
                            status = 1;
                        }
                    }
                }
            }
            io.err.extend_from_slice(&err);
            if n == last {
                io.out.extend_from_slice(&out);
            } else {
                input = Some(out);
            }
        }
        status
    }

    fn write_file(&self, path: &str, data: &[u8], append: bool) -> bool {
        let host = self.store.host_path(path);
        let file = fs::OpenOptions::new().create(true).write(true).append(append).truncate(!append).open(host);
        file.and_then(|mut f| f.write_all(data)).is_ok()
    }

    fn command(&mut self, argv: &[String], io: &mut Io) -> i32 {
        let name = argv[0].rsplit('/').next().unwrap_or(&argv[0]);
        let args = &argv[1..];
        match name {
            "sh" if args.first().map(String::as_str) == Some("-c") => match args.get(1) {
                Some(script) => {
                    let mut inner = Shell { store: self.store, status: self.status, exited: false };
                    inner.script(script, io)
                }
                None => {
                    io.warn("/system/bin/sh: -c: option requires an argument");
                    1
                }
            },
            "exit" => {
                self.exited = true;
                args.first().and_then(|a| a.parse().ok()).unwrap_or(self.status)
            }
            _ => match toolbox::run(self.store, name, args, io)
                .or_else(|| framework::run(self.store, name, args, io))
                .or_else(|| packages::run(self.store, name, args, io))
            {
                Some(status) => status,
                None => {
                    io.warn(format!("/system/bin/sh: {name}: inaccessible or not found"));
                    127
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use sha2::Digest;

    use super::*;

    fn sh(script: &str) -> (String, String, i32) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), "S").unwrap();
        let mut io = Io { stdin: &mut std::io::empty(), out: Vec::new(), err: Vec::new() };
        let status = run(&store, script, &mut io);
        (String::from_utf8(io.out).unwrap(), String::from_utf8(io.err).unwrap(), status)
    }

    #[test]
    fn the_lab_sentinel_reports_the_status() {
        assert_eq!(sh("false; echo \"__lab_exit=$?\""), ("__lab_exit=1\n".into(), String::new(), 0));
        assert_eq!(sh("nosuch a b; echo \"__lab_exit=$?\"").0, "__lab_exit=127\n");
        assert_eq!(sh("nosuch").1, "/system/bin/sh: nosuch: inaccessible or not found\n");
    }

    #[test]
    fn lists_pipes_quotes_and_substitution() {
        assert_eq!(sh("true && echo a || echo b; false && echo c || echo 'd  e'").0, "a\nd  e\n");
        let piped = sh("echo hi > /data/local/tmp/f; cat /data/local/tmp/f | sha256sum").0;
        assert_eq!(piped, format!("{}  -\n", hex::encode(sha2::Sha256::digest(b"hi\n"))));
        assert_eq!(sh("echo $(echo x y) \"$(echo  z)\"").0, "x y z\n");
        assert_eq!(sh("sh -c 'exit 3'; echo $?").0, "3\n");
        assert_eq!(sh("cat /nope 2>&1").0, "cat: /nope: No such file or directory\n");
        assert_eq!(sh("echo \"unclosed").2, 2);
    }
}
