//! `[serve]` of lab.toml: where `lab serve` listens and who may read and change the lab
//! through it (docs/serve.md).

use std::net::SocketAddr;
use std::path::Path;

use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::Table;
use crate::config::{PublicUrl, ServeSettings};

const SERVE_KEYS: &[&str] = &[
    "bind",
    "token_file",
    "public_read",
    "public_url",
    "header_timeout",
    "max_connections",
    "max_body_bytes",
    "runbooks",
];

/// Reads `[serve]`; the defaults where it (or a key) is missing or wrong (then reported).
/// `token_file` and `runbooks` are relative to the lab file's folder.
pub(crate) fn read_serve(root: &Table, p: &mut Problems, base: &Path) -> ServeSettings {
    let mut serve = ServeSettings::default();
    serve.runbooks = base.join(&serve.runbooks);
    let Some(t) = root.get("serve").and_then(|f| f.table(p)) else {
        return serve;
    };
    t.check_keys(p, SERVE_KEYS);
    if let Some(f) = t.get("bind")
        && let Some(text) = f.str(p)
    {
        match text.parse::<SocketAddr>() {
            Ok(addr) => serve.bind = addr,
            Err(_) => f.problem(
                p,
                format!("`{text}` is not an address and port"),
                "write `bind = \"127.0.0.1:8470\"` (or `\"0.0.0.0:8470\"` with a token_file)",
            ),
        }
    }
    if let Some(f) = t.get("token_file")
        && let Some(text) = f.str(p)
    {
        if text.trim().is_empty() {
            f.problem(
                p,
                "the token file is empty",
                "name a file holding the token, e.g. `token_file = \"serve.token\"`",
            );
        } else {
            serve.token_file = Some(base.join(text));
        }
    }
    if let Some(f) = t.get("runbooks")
        && let Some(text) = f.str(p)
    {
        if text.trim().is_empty() {
            f.problem(
                p,
                "the runbook folder is empty",
                "name the folder whose runbooks the Submit page offers, e.g. `runbooks = \"runbooks\"`",
            );
        } else {
            serve.runbooks = base.join(text);
        }
    }
    if let Some(b) = t.get("public_read").and_then(|f| f.bool(p)) {
        serve.public_read = b;
    }
    if let Some(f) = t.get("public_url")
        && let Some(text) = f.str(p)
    {
        match public_url(text) {
            Some(url) => serve.public_url = Some(url),
            None => f.problem(
                p,
                format!("`{text}` is not the address of a site"),
                "write the scheme and host people open, e.g. `public_url = \"https://lab.example.org\"`",
            ),
        }
    }
    if let Some(d) = t.get("header_timeout").and_then(|f| f.positive_duration(p)) {
        serve.header_timeout = d;
    }
    if let Some(n) = t.get("max_connections").and_then(|f| f.integer_in(p, 1, 1_000_000)) {
        serve.max_connections = n as u32;
    }
    // Below 1 KiB not even the login form fits.
    if let Some(n) = t.get("max_body_bytes").and_then(|f| f.integer_in(p, 1024, i64::from(u32::MAX))) {
        serve.max_body_bytes = n as u32;
    }
    serve
}

/// `https://host[:port]` (a trailing `/` allowed), else `None`.
fn public_url(text: &str) -> Option<PublicUrl> {
    let (https, rest) = match text.split_once("://")? {
        ("https", rest) => (true, rest),
        ("http", rest) => (false, rest),
        _ => return None,
    };
    let host = rest.strip_suffix('/').unwrap_or(rest);
    // Browsers leave the default port out of `Host` and `Origin`.
    let host = host.strip_suffix(if https { ":443" } else { ":80" }).unwrap_or(host);
    let ok = !host.is_empty()
        && host.len() <= 253
        && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    ok.then(|| PublicUrl { host: host.to_ascii_lowercase(), https })
}
