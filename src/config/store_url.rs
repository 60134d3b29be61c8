//! `postgres://user[:password]@host[:port]/db[?sslmode=…]`: where a PostgreSQL store is,
//! and how it is shown: never with its password (errors, `lab status`, manifests, reports,
//! events and logs all use [`PgUrl::shown`]).

use std::str::FromStr;

/// A parsed store URL.
#[derive(Clone)]
pub struct PgUrl {
    pub(crate) config: tokio_postgres::Config,
    shown: String,
    /// `sslmode`, as libpq reads it (default `prefer`).
    pub(crate) tls: TlsMode,
    /// `sslrootcert`: the CA certificates (PEM) `verify-ca` and `verify-full` trust;
    /// default `~/.postgresql/root.crt`, as libpq's.
    pub(crate) root_cert: Option<std::path::PathBuf>,
}

/// `sslmode`: whether the connection is encrypted, and what of the server is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Never encrypted.
    Disable,
    /// Encrypted if the server offers it; the server's certificate is not checked.
    Prefer,
    /// Always encrypted; the server's certificate is not checked.
    Require,
    /// Always encrypted, by a certificate the root certificates sign.
    VerifyCa,
    /// As `VerifyCa`, and the certificate names the host connected to.
    VerifyFull,
}

/// Why a PostgreSQL store's URL was refused; never repeats the URL (it may hold a password).
#[derive(Debug, thiserror::Error)]
pub enum PgUrlError {
    #[error("a PostgreSQL store is a URL starting with postgres://")]
    NotPostgres,
    #[error("sslmode `{0}` is not one lab knows; write disable, prefer, require, verify-ca or verify-full")]
    SslMode(String),
    /// tokio-postgres' message names the part that is wrong, not the URL.
    #[error("not a PostgreSQL URL ({0}); write postgres://USER@HOST:PORT/DATABASE")]
    Syntax(#[source] tokio_postgres::Error),
}

impl TlsMode {
    fn parse(v: &str) -> Result<TlsMode, PgUrlError> {
        Ok(match v {
            "disable" => TlsMode::Disable,
            "allow" | "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            other => return Err(PgUrlError::SslMode(other.to_string())),
        })
    }
}

impl std::fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgUrl({})", self.shown)
    }
}

impl PgUrl {
    /// Whether `text` names a PostgreSQL store rather than a SQLite file.
    pub fn is_postgres(text: &str) -> bool {
        text.starts_with("postgres://") || text.starts_with("postgresql://")
    }

    /// Parses `text`; the error never repeats it (it may hold a password).
    pub fn parse(text: &str) -> Result<PgUrl, PgUrlError> {
        if !PgUrl::is_postgres(text) {
            return Err(PgUrlError::NotPostgres);
        }
        // tokio-postgres reads disable, prefer and require; verify-* and the root
        // certificate are this type's (the TLS connector checks them).
        let (base, query) = text.split_once('?').unwrap_or((text, ""));
        let (mut tls, mut root_cert, mut rest) = (TlsMode::Prefer, None, Vec::new());
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("sslmode", v)) => tls = TlsMode::parse(v)?,
                Some(("sslrootcert", v)) => root_cert = Some(std::path::PathBuf::from(v)),
                _ => rest.push(pair),
            }
        }
        let ssl = match tls {
            TlsMode::Disable => "disable",
            TlsMode::Prefer => "prefer",
            _ => "require",
        };
        let sslmode = format!("sslmode={ssl}");
        rest.push(&sslmode);
        let text = format!("{base}?{}", rest.join("&"));
        let config = tokio_postgres::Config::from_str(&text).map_err(PgUrlError::Syntax)?;
        let user = config.get_user().unwrap_or("");
        let hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
            .map(|(h, p)| match h {
                tokio_postgres::config::Host::Tcp(h) => format!("{h}:{p}"),
                tokio_postgres::config::Host::Unix(path) => format!("{}:{p}", path.display()),
            })
            .collect();
        let db = config.get_dbname().unwrap_or(user);
        let shown = format!(
            "postgres://{}{}/{db}",
            if user.is_empty() { String::new() } else { format!("{user}@") },
            hosts.join(",")
        );
        Ok(PgUrl { config, shown, tls, root_cert })
    }

    /// The URL without its password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The same server, with TCP keepalives every 30 s: an idle session across a firewall
    /// stays open, and one whose peer is gone is found out.
    pub fn with_keepalives(&self) -> PgUrl {
        let mut config = self.config.clone();
        config.keepalives(true).keepalives_idle(std::time::Duration::from_secs(30));
        PgUrl { config, ..self.clone() }
    }

    /// `text` (a lab file that names this store) with the URL's password masked wherever
    /// it is written, as given (`raw`: the URL's text in the file) or decoded: the text is
    /// kept with every campaign.
    pub fn redact_in(&self, text: &str, raw: &str) -> String {
        let Some(password) = self.config.get_password().map(String::from_utf8_lossy) else {
            return text.to_string();
        };
        // The password as written: between the user's `:` and the last `@` before the host.
        let written = raw
            .split_once("://")
            .and_then(|(_, rest)| rest.split('/').next())
            .and_then(|auth| auth.rsplit_once('@'))
            .and_then(|(userinfo, _)| userinfo.split_once(':'))
            .map(|(_, p)| p.to_string());
        let mut out = text.to_string();
        for p in written.iter().map(String::as_str).chain([password.as_ref()]) {
            if !p.is_empty() {
                out = out.replace(p, "********");
            }
        }
        out
    }

    /// The same server, the connection named `name` to it (`application_name`: what
    /// `pg_stat_activity` shows an administrator).
    pub fn named(&self, name: &str) -> PgUrl {
        let mut config = self.config.clone();
        config.application_name(name);
        PgUrl { config, ..self.clone() }
    }

    /// Whether the URL carried a password.
    pub fn has_password(&self) -> bool {
        self.config.get_password().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::PgUrl;

    #[test]
    fn the_password_is_never_shown() {
        let u = PgUrl::parse("postgres://lab:s3cret-pw@db.example:6432/labdb?sslmode=disable").unwrap();
        assert_eq!(u.shown(), "postgres://lab@db.example:6432/labdb");
        assert!(u.has_password());
        assert!(!format!("{u:?}").contains("s3cret"));
        let e = PgUrl::parse("postgres://lab:s3cret-pw@db.example:notaport/labdb").err().unwrap().to_string();
        assert!(!e.contains("s3cret"), "{e}");
        assert!(e.contains("postgres://USER@HOST:PORT/DATABASE"), "{e}");
    }

    #[test]
    fn a_lab_file_keeps_no_password_as_written_or_decoded() {
        let raw = "postgres://lab:p%40ss-w0rd@db.example:6432/labdb";
        let u = PgUrl::parse(raw).unwrap();
        let text = format!("[lab]\nname = \"x\"\nstore = \"{raw}\"\n# old one: p@ss-w0rd\n");
        let out = u.redact_in(&text, raw);
        assert!(!out.contains("p%40ss-w0rd") && !out.contains("p@ss-w0rd"), "{out}");
        assert!(out.contains("store = \"postgres://lab:********@db.example:6432/labdb\""), "{out}");
        let none = PgUrl::parse("postgres://lab@db.example/labdb").unwrap();
        assert_eq!(none.redact_in(&text, "postgres://lab@db.example/labdb"), text);
    }
}
