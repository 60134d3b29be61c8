//! Where a PostgreSQL store's password comes from when its URL has none, in this order:
//! `[lab] store_password_command` (a program that prints it), `PGPASSWORD`, then the
//! password file libpq reads (`PGPASSFILE`, else `~/.pgpass`). None found: the server is
//! asked without one (`trust` or `peer` authentication). The password is never shown: not
//! in errors, and the command's output is never repeated.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::PgUrl;

/// How long the password command may take (it may ask a keyring).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Why no password could be read; never holds the password, nor repeats what the command
/// printed on its standard output.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("PGPASSWORD is not UTF-8; fix: set it to the password")]
    NotUtf8,
    #[error("the store's password command `{name}` cannot start: {source}; {FIX}")]
    Start { name: String, source: std::io::Error },
    #[error("the store's password command `{name}` gave no answer within {} s; {FIX}", COMMAND_TIMEOUT.as_secs())]
    Timeout { name: String },
    /// `said`: the first line of what it printed on its standard error.
    #[error("the store's password command `{name}` failed ({status}): {said}; {FIX}")]
    Failed { name: String, status: std::process::ExitStatus, said: String },
    #[error("the store's password command `{name}` printed no text; {FIX}")]
    NotText { name: String },
    #[error("the store's password command `{name}` printed nothing; {FIX}")]
    Nothing { name: String },
}

const FIX: &str = "fix: check `[lab] store_password_command` in the lab file";

impl PgUrl {
    /// This URL with its password found (see the module). `Err`: why none could be read
    /// and the fix, without the password.
    pub fn with_password(&self, command: &[String]) -> Result<PgUrl, PasswordError> {
        if self.has_password() {
            return Ok(self.clone());
        }
        let password = if !command.is_empty() {
            Some(run_command(command)?)
        } else if let Some(p) = std::env::var_os("PGPASSWORD").filter(|p| !p.is_empty()) {
            Some(p.into_string().map_err(|_| PasswordError::NotUtf8)?)
        } else {
            pgpass_file().and_then(|f| std::fs::read_to_string(f).ok()).and_then(|text| self.pgpass_match(&text))
        };
        let mut url = self.clone();
        if let Some(p) = password {
            url.config.password(p);
        }
        Ok(url)
    }

    /// The password of the first line of a password file that matches this URL's first
    /// host, port, database and user (`*` matches anything; `\:` and `\\` are escapes;
    /// `#` starts a comment), as libpq reads it.
    fn pgpass_match(&self, text: &str) -> Option<String> {
        let host = match self.config.get_hosts().first()? {
            postgres::config::Host::Tcp(h) => h.clone(),
            // libpq matches a socket folder as `localhost`.
            postgres::config::Host::Unix(_) => "localhost".to_string(),
        };
        let port = self.config.get_ports().first().copied().unwrap_or(5432).to_string();
        let user = self.config.get_user().unwrap_or("").to_string();
        let db = self.config.get_dbname().map_or_else(|| user.clone(), str::to_string);
        let want = [host, port, db, user];
        text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).find_map(|line| {
            let fields = split_fields(line);
            if fields.len() != 5 {
                return None;
            }
            let matches = fields[..4].iter().zip(&want).all(|(f, w)| f == "*" || f == w);
            matches.then(|| fields[4].clone())
        })
    }
}

/// `a:b\:c:d` → `["a", "b:c", "d"]`.
fn split_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut().unwrap_or(&mut String::new()).extend(chars.next()),
            ':' => fields.push(String::new()),
            c => fields.last_mut().unwrap_or(&mut String::new()).push(c),
        }
    }
    fields
}

fn pgpass_file() -> Option<PathBuf> {
    match std::env::var_os("PGPASSFILE") {
        Some(f) => Some(PathBuf::from(f)),
        None => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")),
    }
}

/// Runs the password command (argv, no shell) and takes the first line it prints.
fn run_command(argv: &[String]) -> Result<String, PasswordError> {
    let name = argv[0].clone();
    let mut child = std::process::Command::new(&name)
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|source| PasswordError::Start { name: name.clone(), source })?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        out
    });
    let err_reader = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = stderr.read_to_string(&mut err);
        err
    });
    let deadline = std::time::Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PasswordError::Timeout { name });
            }
        }
    };
    let out = reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    if !status.success() {
        let said = err.lines().next().unwrap_or("").trim().to_string();
        return Err(PasswordError::Failed { name, status, said });
    }
    let Ok(text) = String::from_utf8(out) else { return Err(PasswordError::NotText { name }) };
    match text.lines().next().map(str::trim_end) {
        Some(p) if !p.is_empty() => Ok(p.to_string()),
        _ => Err(PasswordError::Nothing { name }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> PgUrl {
        PgUrl::parse(text).unwrap()
    }

    #[test]
    fn a_password_file_line_matches_host_port_database_and_user_with_wildcards_and_escapes() {
        let file = "# comment\n\
                    other.example:5432:labdb:lab:wrong\n\
                    db.example:6432:labdb:lab:pa\\:ss\\\\word\n\
                    *:*:*:lab:fallback\n";
        let u = url("postgres://lab@db.example:6432/labdb");
        assert_eq!(u.pgpass_match(file).as_deref(), Some("pa:ss\\word"));
        assert_eq!(url("postgres://lab@db.example/labdb").pgpass_match(file).as_deref(), Some("fallback"));
        assert_eq!(url("postgres://ana@db.example:6432/labdb").pgpass_match(file), None);
        // The database defaults to the user's name.
        assert_eq!(url("postgres://lab@h").pgpass_match("h:5432:lab:lab:x").as_deref(), Some("x"));
    }

    #[test]
    fn the_command_prints_the_password_and_its_failures_never_repeat_its_output() {
        let cmd = |s: &str| vec!["sh".to_string(), "-c".to_string(), s.to_string()];
        let u = url("postgres://lab@db.example/labdb");
        let with = u.with_password(&cmd("printf 'top-secret\\nsecond line\\n'")).unwrap();
        assert_eq!(with.config.get_password(), Some(&b"top-secret"[..]));
        assert!(!format!("{with:?}").contains("top-secret"));
        let e = u.with_password(&cmd("echo top-secret; echo 'no keyring' >&2; exit 3")).unwrap_err().to_string();
        assert!(e.contains("failed") && e.contains("no keyring") && e.contains("store_password_command"), "{e}");
        assert!(!e.contains("top-secret"), "{e}");
        let e = u.with_password(&["/nonexistent/pass".to_string()]).unwrap_err().to_string();
        assert!(e.contains("cannot start"), "{e}");
        assert!(u.with_password(&cmd("true")).unwrap_err().to_string().contains("printed nothing"));
        // A password in the URL wins; the command is not run.
        let given = url("postgres://lab:in-url@db.example/labdb");
        assert_eq!(given.with_password(&cmd("exit 1")).unwrap().config.get_password(), Some(&b"in-url"[..]));
    }
}
