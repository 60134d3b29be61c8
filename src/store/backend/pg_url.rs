//! `postgres://user[:password]@host[:port]/db[?sslmode=…]`: where a PostgreSQL store is,
//! and how it is shown: never with its password (errors, `lab status`, manifests, reports,
//! events and logs all use [`PgUrl::shown`]).

use std::str::FromStr;

/// A parsed store URL.
#[derive(Clone)]
pub struct PgUrl {
    pub(super) config: postgres::Config,
    shown: String,
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
    pub fn parse(text: &str) -> Result<PgUrl, String> {
        if !PgUrl::is_postgres(text) {
            return Err("a PostgreSQL store is a URL starting with postgres://".into());
        }
        let config = postgres::Config::from_str(text).map_err(|e| {
            // tokio-postgres' messages name the part that is wrong, not the URL.
            format!("not a PostgreSQL URL ({e}); write postgres://USER@HOST:PORT/DATABASE")
        })?;
        let user = config.get_user().unwrap_or("");
        let hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
            .map(|(h, p)| match h {
                postgres::config::Host::Tcp(h) => format!("{h}:{p}"),
                postgres::config::Host::Unix(path) => format!("{}:{p}", path.display()),
            })
            .collect();
        let db = config.get_dbname().unwrap_or(user);
        let shown = format!(
            "postgres://{}{}/{db}",
            if user.is_empty() { String::new() } else { format!("{user}@") },
            hosts.join(",")
        );
        Ok(PgUrl { config, shown })
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
        PgUrl { config, shown: self.shown.clone() }
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
        let e = PgUrl::parse("postgres://lab:s3cret-pw@db.example:notaport/labdb").err().unwrap();
        assert!(!e.contains("s3cret"), "{e}");
        assert!(e.contains("postgres://USER@HOST:PORT/DATABASE"), "{e}");
    }
}
